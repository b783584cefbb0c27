"""Writes in batches: the posts, deletes and read marks one process receives at the same
time share one writers' transaction (storage.group_commit), so the site's one writers'
lock is taken once per batch rather than once per write, and one commit makes them all
durable.

Inside the batch each write meets the same rules, in the same order, as it would alone:
its Idempotency-Key is looked up (a replay gets the first answer); a delete or a read
mark (a ``Change``, web.writes) is checked, then applied; a post's sign-in key must
still be kept when it was not read before (web.known_keys), its author must be known,
its target and parent must pass the checks, and the user's posting limit is taken. A
write refused by any of them writes nothing and leaves the others be. The changes run
first, one after another; then the posts are written together
(storage.posting.write_batch) with their stored renders, events and keyed answers.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Protocol

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError

from commentsvc.rules import rendered
from commentsvc.storage import group_commit, posting, prepared, store
from commentsvc.storage.engine import get_engine, hung, writing
from commentsvc.web import auth, idempotency
from commentsvc.web.exceptions import APIError, PermissionDenied

if TYPE_CHECKING:
    from commentsvc.service import CommentService

# The most writes one transaction holds.
MAX_BATCH = 64


@dataclass(frozen=True, slots=True)
class PostRequest:
    """A post whose fields the schema loaded, from a signed-in viewer, waiting for its
    batch; ``locate`` gives a new comment's URL as this request names it."""

    viewer: auth.Viewer
    fields: dict[str, Any]
    write: idempotency.Keyed | None
    locate: Callable[[int], str]


@dataclass(frozen=True, slots=True)
class Posted:
    """A post's answer: the comment written, where it is and its stored render, or the
    first answer of its Idempotency-Key (``replay``). ``payload`` is how the viewer sees
    it, when the batch needed it (to keep it with the key); None otherwise."""

    comment: store.Comment | None
    location: str | None
    payload: dict[str, Any] | None
    replay: idempotency.Stored | None
    stored: str | None = None

    def shown_to(self, viewer: auth.Viewer) -> dict[str, Any]:
        """The comment written as ``viewer`` sees it: the comment schema's dump, made from
        its stored render (rules.rendered.entry)."""
        if self.payload is not None:
            return self.payload
        assert self.comment is not None and self.stored is not None
        return rendered.entry(self.stored, self.comment.author_id, self.comment.is_deleted,
                              self.comment.parent_id is None, viewer)


class Change(Protocol):
    """A write to an existing comment (a delete, a read mark; web.writes): ``check``
    raises its refusal (an APIError) before anything is written; ``apply`` writes, and
    what it raises is the whole batch's."""

    @property
    def write(self) -> idempotency.Keyed | None: ...

    def check(self, conn: Connection) -> None: ...

    def apply(self, conn: Connection) -> Any: ...


@dataclass(frozen=True, slots=True)
class Changed:
    """A change's answer: what ``apply`` gave, or the first answer of its key."""

    result: Any
    replay: idempotency.Stored | None


class _TryAgain:
    """A write whose Idempotency-Key another write of the same batch carries: it goes into
    the next batch, where it finds that one's answer."""


TRY_AGAIN: Final = _TryAgain()

Item = PostRequest | Change
Outcome = group_commit.Outcome[Posted | Changed | _TryAgain]

_batches: weakref.WeakKeyDictionary[CommentService, group_commit.GroupCommit[
    Item, Posted | Changed | _TryAgain]] = weakref.WeakKeyDictionary()
_making = threading.Lock()


def submit(service: CommentService, post: PostRequest) -> Posted:
    """Write ``post`` in this process's next batch; its answer, or raise its refusal."""
    outcome = _submit(service, post)
    assert isinstance(outcome, Posted)
    return outcome


def submit_change(service: CommentService, change: Change) -> Changed:
    """Apply ``change`` in this process's next batch; its answer, or raise its refusal."""
    outcome = _submit(service, change)
    assert isinstance(outcome, Changed)
    return outcome


def _submit(service: CommentService, item: Item) -> Posted | Changed:
    batches = _batches.get(service)
    if batches is None:
        with _making:
            batches = _batches.get(service)
            if batches is None:
                batches = _batches[service] = group_commit.GroupCommit(
                    lambda take: write(service, take), MAX_BATCH)
    while True:
        outcome = batches.submit(item)
        if not isinstance(outcome, _TryAgain):
            return outcome


def write(service: CommentService, take: Callable[[], list[Item]]) -> Sequence[Outcome]:
    """A batch in one transaction: ``take()`` gives its writes once the transaction holds
    the writers' lock. A batch that met a connection without its prepared statements runs
    once more, the statements sent whole (storage.prepared). Should the database or a
    check refuse the whole batch for something one write did (not an outage, which is
    every write's), each write runs alone, so only that write fails."""
    taken: list[list[Item]] = []

    def take_once() -> list[Item]:
        if not taken:
            taken.append(take())
        return taken[0]

    try:
        return _write(service, take_once)
    except (DBAPIError, APIError) as exc:
        if not taken:  # before it held the lock (writes paused, the database away): every
            raise      # write's, which group_commit gives to every write waiting
        batch = taken[0]
        if isinstance(exc, DBAPIError) and prepared.gone(exc):
            return write(service, lambda: batch)
        if len(batch) == 1 or _outage(exc):
            raise
    return [_alone(service, item) for item in batch]


def _outage(exc: Exception) -> bool:
    """The database is away or too slow: every write of the batch would meet it too."""
    return isinstance(exc, DBAPIError) and (
        exc.connection_invalidated or hung(exc) or isinstance(exc, OperationalError))


def _alone(service: CommentService, item: Item) -> Outcome:
    """One write of a refused batch in a batch of its own (``write``: it too runs once
    more, sent whole, if it is the first to meet prepared statements not its own)."""
    try:
        return write(service, lambda: [item])[0]
    except Exception as exc:  # this write's own failure
        return exc


def _write(service: CommentService, take: Callable[[], list[Item]]) -> list[Outcome]:
    settings = service.settings
    with writing(get_engine()) as conn:
        batch = take()
        outcomes: list[Outcome | None] = [None] * len(batch)
        keys: set[tuple[int, str]] = set()
        for i, item in enumerate(batch):
            if item.write is None:
                continue
            if (item.write.user_id, item.write.key) in keys:
                outcomes[i] = TRY_AGAIN
                continue
            keys.add((item.write.user_id, item.write.key))
            try:
                replay = idempotency.find(conn, item.write, settings.idempotency_retention_hours)
            except idempotency.KeyReused as exc:
                outcomes[i] = exc
                continue
            if replay is not None:
                outcomes[i] = (Posted(None, None, None, replay) if isinstance(item, PostRequest)
                               else Changed(None, replay))
        for i, item in enumerate(batch):
            if outcomes[i] is None and not isinstance(item, PostRequest):
                try:
                    item.check(conn)
                except APIError as exc:
                    outcomes[i] = exc
                    continue
                outcomes[i] = Changed(item.apply(conn), None)
        posts = {i: item for i, item in enumerate(batch)
                 if outcomes[i] is None and isinstance(item, PostRequest)}
        if posts:
            _write_posts(conn, service, posts, outcomes)
    return [outcome if outcome is not None else group_commit.BatchInterrupted()
            for outcome in outcomes]


def _write_posts(conn: Connection, service: CommentService, posts: dict[int, PostRequest],
                 outcomes: list[Outcome | None]) -> None:
    """The batch's posts (by their place in it), each outcome set in ``outcomes``."""
    settings = service.settings
    news = {i: _new(post) for i, post in posts.items()}
    waiting = list(posts)
    facts = posting.read_facts(conn, list(news.values()), [
        post.viewer.unconfirmed_key for post in posts.values()
        if post.viewer.unconfirmed_key is not None])
    for i in waiting:
        viewer = posts[i].viewer
        if viewer.unconfirmed_key is not None \
                and facts.keys.get(viewer.unconfirmed_key) != viewer.id:
            outcomes[i] = auth.AuthenticationFailed()  # revoked since (web.known_keys)
            continue
        if viewer.id in facts.authors:
            continue
        name = auth.recordable_name(viewer)
        if name is None:
            outcomes[i] = PermissionDenied(auth.UNKNOWN_ACCOUNT)
            continue
        auth.ensure_user(conn, viewer)  # a host's user, on their first write
        facts.authors[viewer.id] = posting.Author(name, viewer.avatar)
    waiting = [i for i in waiting if outcomes[i] is None]
    checked = posting.check_batch(facts, [news[i] for i in waiting],
                                  settings.target_exists)
    accepted: list[tuple[int, store.NewComment]] = []
    by_user: Counter[int] = Counter()  # the posts accepted so far, by author
    for i, post_or_refusal in zip(waiting, checked, strict=True):
        if isinstance(post_or_refusal, Exception):
            outcomes[i] = post_or_refusal
            continue
        user_id = posts[i].viewer.id
        try:
            service.post_limiter.check(user_id, by_user[user_id] + 1)
        except APIError as exc:  # Throttled (429): this post only
            outcomes[i] = exc
            continue
        by_user[user_id] += 1
        accepted.append((i, post_or_refusal))
    written = posting.write_batch(conn, facts, [new for _, new in accepted], settings)
    for (i, _), (comment, stored) in zip(accepted, written, strict=True):
        post = posts[i]
        posted = Posted(comment, post.locate(comment.id), None, None, stored)
        if post.write is not None:
            posted = replace(posted, payload=posted.shown_to(post.viewer))
            idempotency.remember(conn, post.write, 201, posted.payload, posted.location,
                                 comment.id)
        outcomes[i] = posted
    for user_id, written_posts in by_user.items():  # written: only the commit is left
        service.post_limiter.count(user_id, written_posts)


def _new(post: PostRequest) -> store.NewComment:
    fields = post.fields
    return store.NewComment(
        content_type=fields["content_type"], object_id=fields["object_id"],
        author_id=post.viewer.id, body=fields["body"], parent_id=fields["parent"],
        is_anonymous=fields["is_anonymous"])
