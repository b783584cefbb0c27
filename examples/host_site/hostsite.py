"""A small host site that mounts the comment service under /community.

It keeps everything of its own: its database file, its tables (``host_user``,
``blog_post``), its session login and its content type ``blog.post``. The service adds
its ``commentsvc_*`` tables to the same database and trusts the site's login.

    make install                       # in a checkout: the dependencies and this package
    flask --app examples/host_site/hostsite.py init-site
    flask --app examples/host_site/hostsite.py run
    # http://127.0.0.1:5000/ ; sign in as ann / ann-secret, then post on /posts/1
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from flask import Flask, abort, redirect, render_template_string, request, session, url_for
from flask_sqlalchemy import SQLAlchemy
from markupsafe import Markup
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash
from werkzeug.wrappers import Response

from commentsvc import comments_api
from commentsvc.storage import engine as comments_db
from commentsvc.storage.database_urls import normalise_url

db = SQLAlchemy()


class HostUser(db.Model):
    """The site's own accounts."""

    __tablename__ = "host_user"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(unique=True)
    password_hash: Mapped[str]
    is_admin: Mapped[bool] = mapped_column(default=False)


class BlogPost(db.Model):
    """The site's own content, which readers comment on as ``blog.post``."""

    __tablename__ = "blog_post"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str]
    text: Mapped[str]


def current_user() -> SimpleNamespace | None:
    """The signed-in site user as the comment service wants it, or None."""
    user = db.session.get(HostUser, session["user_id"]) if "user_id" in session else None
    if user is None:
        return None
    return SimpleNamespace(id=user.id, username=user.name, avatar=None, is_staff=user.is_admin)


def post_exists(content_type: str, object_id: int) -> bool:
    """Whether a comment may be attached to this object of the site's own content types."""
    return content_type == "blog.post" and db.session.get(BlogPost, object_id) is not None


PAGE = """<!doctype html><title>{{ title }}</title>
<p>{% if user %}Signed in as {{ user.name }}.
<form method="post" action="{{ url_for('logout') }}" style="display:inline">
<button>Sign out</button></form>
{% else %}<a href="{{ url_for('login') }}">Sign in</a>{% endif %}</p>
<h1>{{ title }}</h1>{{ content }}"""


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """The site: its own settings first, then the comment service's, then the blueprint."""
    app = Flask(__name__, instance_relative_config=True)
    os.makedirs(app.instance_path, exist_ok=True)
    app.config.from_mapping(
        SECRET_KEY=os.environ.get("HOST_SITE_SECRET_KEY", "change me"),
        SQLALCHEMY_DATABASE_URI="sqlite:///" + os.path.join(app.instance_path, "host_site.db"),
        # The comment service: where comments may go, and who is signed in.
        COMMENTSVC_CONTENT_TYPES="blog.post,users.user",
        COMMENTSVC_CURRENT_USER=current_user,
        COMMENTSVC_TARGET_EXISTS=post_exists,
        COMMENTSVC_PAGE_SIZE=20,
    )
    app.config.update(test_config or {})
    # The site's own URL follows the service's rule: postgresql:// means psycopg2.
    app.config["SQLALCHEMY_DATABASE_URI"] = normalise_url(app.config["SQLALCHEMY_DATABASE_URI"])
    db.init_app(app)

    @app.get("/")
    def home() -> str:
        posts = db.session.scalars(db.select(BlogPost).order_by(BlogPost.id)).all()
        links = Markup("").join(
            Markup('<li><a href="{}">{}</a></li>').format(url_for("post", post_id=p.id), p.title)
            for p in posts)
        return render_template_string(PAGE, title="Host site", content=Markup("<ul>{}</ul>")
                                      .format(links),
                                      user=signed_in_user())

    @app.get("/posts/<int:post_id>")
    def post(post_id: int) -> str:
        found = db.session.get(BlogPost, post_id) or abort(404)
        comments = url_for("commentsvc.comment_list", content_type="blog.post",
                           object_id=post_id)
        content = Markup("<p>{}</p><p>Comments: <a href='{}'>{}</a> (POST there with "
                         "content_type=blog.post, object_id={}).</p>").format(
            found.text, comments, comments, post_id)
        return render_template_string(PAGE, title=found.title, content=content,
                                      user=signed_in_user())

    @app.route("/login", methods=["GET", "POST"])
    def login() -> str | Response:
        if request.method == "POST":
            user = db.session.scalar(db.select(HostUser).filter_by(name=request.form["name"]))
            if user and check_password_hash(user.password_hash, request.form["password"]):
                session["user_id"] = user.id
                return redirect(url_for("home"))
        form = Markup('<form method="post"><input name="name"> <input name="password" '
                      'type="password"> <button>Sign in</button></form>')
        return render_template_string(PAGE, title="Sign in", content=form, user=None)

    @app.post("/logout")
    def logout() -> Response:
        session.clear()
        return redirect(url_for("home"))

    @app.cli.command("init-site")
    def init_site() -> None:
        """Create the site's tables and the comment service's, with two users and a post."""
        create_tables(app)
        print("Site ready: sign in as ann / ann-secret or admin / admin-secret.")

    app.register_blueprint(comments_api, url_prefix="/community")
    return app


def signed_in_user() -> HostUser | None:
    return db.session.get(HostUser, session["user_id"]) if "user_id" in session else None


def create_tables(app: Flask) -> None:
    """The site's tables and data (once), then the service's commentsvc_* tables."""
    with app.app_context():
        db.create_all()
        if db.session.get(HostUser, 1) is None:
            db.session.add_all([
                HostUser(id=1, name="ann", password_hash=generate_password_hash("ann-secret")),
                HostUser(id=2, name="admin", is_admin=True,
                         password_hash=generate_password_hash("admin-secret")),
                BlogPost(id=1, title="Hello, world", text="Our first post."),
            ])
            db.session.commit()
        with comments_db.get_engine().begin() as conn:
            comments_db.create_schema(conn)  # what `flask --app ... init-db` does
