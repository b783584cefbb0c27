"""commentsvc: lists user comments attached to site objects at /api/comments/.

Register ``comments_api`` on a Flask app that has Flask-SQLAlchemy set up, and
``ops_api`` for /healthz, /readyz and /metrics if the site wants them.
"""

__version__ = "1.0.0"

from .blueprint import comments_api  # noqa: E402 - after __version__, which it reads
from .ops import ops_api  # noqa: E402

__all__ = ["__version__", "comments_api", "ops_api"]
