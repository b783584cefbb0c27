"""The service run on its own: the app factory, and the ``commentsvc`` command.

    gunicorn 'commentsvc.standalone:create_app()'
"""

from commentsvc.standalone.command import cli
from commentsvc.standalone.factory import create_app, db
from commentsvc.storage.database_urls import normalise_url

__all__ = ["cli", "create_app", "db", "normalise_url"]
