"""Keeping each comment's stored render up to date (rules.rendered): after a write, after
an import, and on demand (the ``rerender`` command).

Every render is made and stored inside the writers' transaction (``engine.writing``), so
a write to the same comment cannot slip in between its read and its store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy.engine import Connection, Engine, Row

from commentsvc.rules.rendered import render
from commentsvc.rules.schemas import Display
from commentsvc.settings import Settings
from commentsvc.storage.engine import writing
from commentsvc.storage.queries import renders as q
from commentsvc.storage.store import Comment

BATCH = 1000


@dataclass(frozen=True, slots=True)
class Renderer:
    """How stored renders are made here: the display (time zone, default avatar) and its
    key (``Settings.render_display``)."""

    display: Display
    key: str

    def render(self, comment: Comment) -> tuple[str, str]:
        """The stored render of ``comment`` and its key."""
        return render(comment, self.display, self.key)

    def save(self, conn: Connection, comments: Iterable[Comment]) -> int:
        """Render ``comments`` and store the renders; how many."""
        ids, shown, keys = [], [], []
        for comment in comments:
            text, key = self.render(comment)
            ids.append(comment.id)
            shown.append(text)
            keys.append(key)
        if not ids:
            return 0
        if conn.dialect.name == "postgresql":  # one statement for the batch
            conn.execute(q.SAVE_MANY, {"ids": ids, "shown": shown, "keys": keys})
        else:
            conn.execute(q.SAVE, [{"id": i, "shown": s, "shown_key": k}
                                  for i, s, k in zip(ids, shown, keys, strict=True)])
        return len(ids)

    def save_one(self, conn: Connection, comment: Comment) -> str:
        """Render one comment, store the render, and give it (its JSON text)."""
        text, key = self.render(comment)
        conn.execute(q.SAVE, {"id": comment.id, "shown": text, "shown_key": key})
        return text

    def save_ids(self, conn: Connection, ids: list[int]) -> int:
        """Render the comments ``ids`` again from their rows."""
        if not ids:
            return 0
        return self.save(conn, _comments(conn.execute(q.COMMENTS_BY_ID, {"ids": ids})))

    def save_author(self, conn: Connection, author_id: int) -> int:
        """Render every comment of one author again (after a rename, a new avatar)."""
        return self.save(conn, _comments(conn.execute(q.BY_AUTHOR, {"author_id": author_id})))

    def save_missing(self, conn: Connection) -> int:
        """Render every comment that has no stored render yet, in the caller's transaction
        (an import's); how many."""
        if conn.dialect.name == "postgresql":
            conn.execute(q.ANALYZE_COMMENTS)
        after, done = 0, 0
        while True:
            comments = _comments(conn.execute(q.MISSING_AFTER,
                                              {"after": after, "batch": BATCH}))
            if not comments:
                return done
            done += self.save(conn, comments)
            after = comments[-1].id

    def save_stale(self, engine: Engine,
                   progress: Callable[[int], None] | None = None) -> int:
        """Render every comment whose stored render is missing or out of date, a batch per
        writers' transaction (API writes wait for one batch at most); how many."""
        after, done = 0, 0
        while True:
            with writing(engine) as conn:
                comments = _comments(conn.execute(
                    q.STALE_AFTER, {"after": after, "batch": BATCH, "display": self.key}))
                saved = self.save(conn, comments)
            if not saved:
                return done
            done += saved
            after = comments[-1].id
            if progress is not None:
                progress(saved)


def for_settings(settings: Settings) -> Renderer:
    """The renderer of an app's settings."""
    return Renderer(Display(tz=settings.tzinfo, default_avatar=settings.default_avatar),
                    settings.render_display)


def _comments(rows: Iterable[Row[tuple[object, ...]]]) -> list[Comment]:
    return [Comment(*row) for row in rows]
