"""The service run on its own: the app factory, and the ``commentsvc`` command.

    gunicorn 'commentsvc.standalone:create_app()'
"""

from commentsvc.standalone.factory import cli, create_app, db, normalise_url

__all__ = ["cli", "create_app", "db", "normalise_url"]
