"""Keeping each comment's stored render up to date (rules.rendered): after a write, after
an import, and on demand (the ``rerender`` command).

Every render is made and stored inside the writers' transaction (``engine.writing``), so
a write to the same comment cannot slip in between its read and its store.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy.engine import Connection, Engine, Row

from commentsvc.rules.comment_lists import lists_of
from commentsvc.rules.rendered import display_tag, render
from commentsvc.rules.schemas import Display
from commentsvc.settings import Settings
from commentsvc.storage.engine import writing
from commentsvc.storage.queries import renders as q
from commentsvc.storage.queries import writes
from commentsvc.storage.queries.schema import COLUMN_LIMITED
from commentsvc.storage.store import Comment

BATCH = 1000
WINDOW = 10 * BATCH

# The engines whose shown_key column takes keys of any length (rules.rendered.render_key).
# A column still limited to the MD5 of earlier versions is looked up again at each use, so
# that init-db's widening of it counts at once, without a restart.
_wide: weakref.WeakSet[Engine] = weakref.WeakSet()


def legacy_keys(conn: Connection) -> bool:
    """Whether keys must take their earlier form (rules.rendered.legacy_render_key) on this
    database: PostgreSQL whose shown_key column ``init-db`` has not widened yet, where a key
    of the new form would not fit and every write would fail."""
    if conn.dialect.name != "postgresql" or conn.engine in _wide:
        return False
    limited = bool(conn.execute(COLUMN_LIMITED, {"table": "commentsvc_comment",
                                                 "column": "shown_key"}).scalar())
    if not limited:
        _wide.add(conn.engine)
    return limited


@dataclass(frozen=True, slots=True)
class Renderer:
    """How stored renders are made here: the display (time zone, default avatar) and its
    key (``Settings.render_display``)."""

    display: Display
    key: str

    def render(self, comment: Comment, legacy: bool = False) -> tuple[str, str]:
        """The stored render of ``comment`` and its key (``legacy``: of the earlier form,
        as ``legacy_keys`` says)."""
        return render(comment, self.display, self.key, legacy)

    def save(self, conn: Connection, comments: Iterable[Comment],
             new_versions: bool = False) -> int:
        """Render ``comments`` and store the renders; how many. ``new_versions``: the lists
        showing a comment whose render changed get new versions (``_new_versions``)."""
        ids, shown, keys = [], [], []
        legacy = legacy_keys(conn)
        for comment in comments:
            text, key = self.render(comment, legacy)
            ids.append(comment.id)
            shown.append(text)
            keys.append(key)
        if not ids:
            return 0
        if new_versions:
            _new_versions(conn, dict(zip(ids, shown, strict=True)))
        if conn.dialect.name == "postgresql":  # one statement for the batch
            conn.execute(q.SAVE_MANY, {"ids": ids, "shown": shown, "keys": keys})
        else:
            conn.execute(q.SAVE, [{"id": i, "shown": s, "shown_key": k}
                                  for i, s, k in zip(ids, shown, keys, strict=True)])
        return len(ids)

    def save_one(self, conn: Connection, comment: Comment) -> str:
        """Render one comment, store the render, and give it (its JSON text)."""
        text, key = self.render(comment, legacy_keys(conn))
        conn.execute(q.SAVE, {"id": comment.id, "shown": text, "shown_key": key})
        return text

    def save_author(self, conn: Connection, author_id: int) -> int:
        """Render every comment of one author again (after a rename, a new avatar), and
        give the lists of those whose render changed new versions."""
        return self.save(conn, _comments(conn.execute(q.BY_AUTHOR, {"author_id": author_id})),
                         new_versions=True)

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
        writers' transaction (API writes wait for one batch at most, which reads a window
        of WINDOW comments at most, however few are stale); how many."""
        after, done = 0, 0
        while True:
            with writing(engine) as conn:
                end = conn.execute(q.WINDOW_END, {"after": after, "span": WINDOW}).scalar()
                comments = _comments(conn.execute(q.STALE_AFTER, {
                    "after": after, "end": end, "batch": BATCH, "display": self.key,
                    "tag": display_tag(self.key), "legacy": legacy_keys(conn)}))
                saved = self.save(conn, comments, new_versions=True)
            done += saved
            if saved and progress is not None:
                progress(saved)
            if len(comments) == BATCH:
                after = comments[-1].id
            elif end is None:
                return done
            else:
                after = end


def for_settings(settings: Settings) -> Renderer:
    """The renderer of an app's settings."""
    return Renderer(Display(tz=settings.tzinfo, default_avatar=settings.default_avatar),
                    settings.render_display)


def _new_versions(conn: Connection, renders: dict[int, str]) -> None:
    """The lists showing a comment whose stored render differs from its new one (``renders``,
    by id) get new versions, so new ETags: an author renamed in the database by a host's
    SQL changes no list's version, and the pages cached or held by clients under the old
    tags must not be served or confirmed any longer. A render made again alike (a key of
    the earlier form rewritten, a user erased twice) changes nothing."""
    keys = {comments.key
            for row in conn.execute(q.STORED_RENDERS, {"ids": list(renders)})
            if row.shown != renders[row.id]
            for comments in lists_of(row.content_type, row.object_id)}
    if keys:
        conn.execute(writes.BUMP_VERSIONS, {"list_keys": sorted(keys)})


def _comments(rows: Iterable[Row[tuple[object, ...]]]) -> list[Comment]:
    return [Comment(*row) for row in rows]
