"""The standalone service in a checkout: `flask --app app ...`, `gunicorn 'app:create_app()'`.

The factory lives in the package (commentsvc.standalone), so the installed ``commentsvc``
command builds the same app.
"""

from commentsvc.operations import startup
from commentsvc.standalone import create_app as _create_app
from commentsvc.standalone import db, normalise_url

# In a command (`flask --app app init-db`), a bad setting is one line, not a traceback.
create_app = startup.reported(_create_app)

__all__ = ["create_app", "db", "normalise_url"]
