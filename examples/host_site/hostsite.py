"""A small host site that mounts the comment service under /community.

It keeps everything of its own: its database file, its tables (``host_user``,
``blog_post``), its session login and its content type ``blog.post``. The service adds
its ``commentsvc_*`` tables to the same database and trusts the site's login.

    make install                       # in a checkout: the dependencies and this package
    flask --app examples/host_site/hostsite.py init-site
    flask --app examples/host_site/hostsite.py run
    # http://127.0.0.1:5000/ ; sign in as ann / ann-secret, then post on /posts/1
    flask --app examples/host_site/hostsite.py deliver   # beside it: webhooks to /hooks/comments

The site hears of every comment through the service's webhooks (docs/EVENTS.md): the
deliver command POSTs each event to the site's ``/hooks/comments``, which checks its
signature with ``commentsvc.webhooks.verify`` and tells the owner of a profile of each new
comment someone else wrote on it ("New comment on your profile"), once, however often an
event arrives. The hook's URL and the shared secret come from HOST_SITE_WEBHOOK_URL
(default http://127.0.0.1:5000/hooks/comments: set it when the site runs elsewhere) and
HOST_SITE_WEBHOOK_SECRET. A profile takes comments once its owner has written a comment
(the service learns of a site user at their first write).
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from flask import Flask, abort, redirect, render_template_string, request, session, url_for
from flask_sqlalchemy import SQLAlchemy
from markupsafe import Markup
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash
from werkzeug.wrappers import Response

from commentsvc import comments_api
from commentsvc.storage import engine as comments_db
from commentsvc.storage.database_urls import normalise_url
from commentsvc.webhooks import InvalidSignature, verify

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


class Notification(db.Model):
    """What the site tells a user: a new comment on their profile (from a webhook). The
    event's id is unique, so an event delivered twice tells them once."""

    __tablename__ = "host_notification"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(index=True)
    event_id: Mapped[str] = mapped_column(unique=True)
    author: Mapped[str]
    comment_id: Mapped[int]


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
        # Webhooks: `flask --app ... deliver` POSTs every event to the site itself.
        COMMENTSVC_WEBHOOK_URLS=os.environ.get("HOST_SITE_WEBHOOK_URL",
                                               "http://127.0.0.1:5000/hooks/comments"),
        COMMENTSVC_WEBHOOK_SECRET=os.environ.get("HOST_SITE_WEBHOOK_SECRET",
                                                 "change me: a webhook secret of 24+ characters"),
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
        user = signed_in_user()
        return render_template_string(PAGE, title="Host site", content=Markup("<ul>{}</ul>{}")
                                      .format(links, notifications_of(user)), user=user)

    @app.post("/hooks/comments")
    def comment_event() -> Response:
        """A webhook of the comment service: signed, or refused; told once per event."""
        try:
            event = verify(app.config["COMMENTSVC_WEBHOOK_SECRET"], request.headers,
                           request.get_data())
        except InvalidSignature:
            return Response("bad signature", status=400)
        data = event["data"]
        owner = (db.session.get(HostUser, data["object_id"])
                 if data["content_type"] == "users.user" else None)
        if (event["type"] == "comment.created" and owner is not None
                and data["comment"]["author"] != owner.name):  # not one's own comment
            db.session.add(Notification(user_id=data["object_id"], event_id=event["id"],
                                        author=data["comment"]["author"],
                                        comment_id=data["comment_id"]))
            try:
                db.session.commit()
            except IntegrityError:  # this event arrived before: told already
                db.session.rollback()
        return Response(status=204)

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


def notifications_of(user: HostUser | None) -> Markup:
    """The signed-in user's notifications, newest first."""
    if user is None:
        return Markup("")
    found = db.session.scalars(db.select(Notification).filter_by(user_id=user.id)
                               .order_by(Notification.id.desc())).all()
    profile = url_for("commentsvc.comment_list", content_type="users.user", object_id=user.id)
    items = Markup("").join(Markup('<li>New comment on <a href="{}">your profile</a> by {}'
                                   '</li>').format(profile, n.author) for n in found)
    return Markup('<h2>Notifications</h2><ul class="notifications">{}</ul>').format(
        items or Markup("<li>None yet.</li>"))


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
