"""The standalone service in a checkout: `flask --app app ...`, `gunicorn 'app:create_app()'`.

The factory lives in the package (commentsvc.standalone), so the installed ``commentsvc``
command builds the same app.
"""

from commentsvc.standalone import create_app, db, normalise_url

__all__ = ["create_app", "db", "normalise_url"]
