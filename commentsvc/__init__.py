"""commentsvc: lists user comments attached to site objects at /api/comments/.

Mount it in a Flask app that has Flask-SQLAlchemy set up with ``CommentService(app)``
(or ``service.init_app(app, url_prefix=...)``; registering ``comments_api`` as a blueprint
does the same), and register ``ops_api`` for /healthz, /readyz and /metrics if the site
wants them.

The package's layers, each a sub-package:

- ``web``: the HTTP face (blueprint, views, negotiation, the browsable page, OpenAPI,
  responses, errors);
- ``rules``: what needs no I/O (pagination, formatting, schemas, permissions);
- ``storage``: the database and caches (engine, all SQL in ``storage.queries``,
  positions and counters, replicas);
- ``interchange``: NDJSON import and export, bulk loading;
- ``operations``: health, metrics, logs, commands, demo data, the production server;
- ``standalone``: the app factory of the service run on its own, and its sign-in page.
"""

from commentsvc.operations.endpoints import ops_api
from commentsvc.service import CommentService
from commentsvc.version import __version__
from commentsvc.web.blueprint import comments_api

__all__ = ["CommentService", "__version__", "comments_api", "ops_api"]
