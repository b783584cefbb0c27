"""commentsvc: lists user comments attached to site objects at /api/comments/.

Register ``comments_api`` on a Flask app that has Flask-SQLAlchemy set up.
"""

from .blueprint import comments_api

__all__ = ["comments_api"]
