"""Writing new comments: a batch of posts checked against the database together, then
written together at their places in their lists (``read_facts``, ``check_batch``,
``write_batch``; web.write_batches gathers the batches).

Runs inside the writer's transaction (``db.writing``), so what is checked cannot change
before the comment is written, and any refusal leaves the database as it was (a refused
post of a batch writes nothing; the others are written).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from commentsvc.rules.comment_lists import lists_of
from commentsvc.rules.events import Subject
from commentsvc.rules.identifiers import INT64_MAX
from commentsvc.storage import outbox, prepared, renders, store
from commentsvc.storage.queries import posting as q
from commentsvc.web.exceptions import ValidationFailed

if TYPE_CHECKING:
    from commentsvc.settings import Settings


def _missing(value: int) -> str:
    return f'Invalid pk "{value}" - object does not exist.'


# A host site's function (content_type, object_id) -> bool (COMMENTSVC_TARGET_EXISTS).
HostCheck = Callable[[str, int], bool]


def _valid_id(value: int) -> bool:
    return 0 < value <= INT64_MAX


@dataclass(frozen=True, slots=True)
class Author:
    """A comment's author as the comment shows them (the service's row of them)."""

    username: str
    avatar: str | None


@dataclass(frozen=True, slots=True)
class _Parent:
    content_type: str
    object_id: int
    root: int
    is_deleted: bool


@dataclass(slots=True)
class BatchFacts:
    """What deciding and placing a batch of posts needs, read in one statement
    (queries.posting.BATCH_FACTS) under the writers' lock."""

    authors: dict[int, Author]
    targets: dict[str, set[int]]
    parents: dict[int, _Parent]
    sizes: dict[str, int]
    max_id: int
    newest_date: datetime | None
    # Sign-in key digests still kept, and whose they are (those asked for).
    keys: dict[str, int]


def read_facts(conn: Connection, posts: Sequence[store.NewComment],
               digests: Sequence[str] = ()) -> BatchFacts:
    """The authors, targets, parents and lists of these posts, and the site's top; and
    which of the sign-in keys ``digests`` are still kept, and whose (web.known_keys)."""
    ids: dict[str, set[int]] = {name: set() for name in q.TARGET_PARAMETERS.values()}
    for post in posts:
        name = q.TARGET_PARAMETERS.get(post.content_type)
        if name is not None and _valid_id(post.object_id):
            ids[name].add(post.object_id)
    params: dict[str, list[Any]] = {name: sorted(found) for name, found in ids.items()}
    params["author_ids"] = sorted({post.author_id for post in posts})
    params["parent_ids"] = sorted({post.parent_id for post in posts
                                   if post.parent_id is not None and _valid_id(post.parent_id)})
    params["list_keys"] = sorted({c.key for post in posts
                                  for c in lists_of(post.content_type, post.object_id)})
    params["digests"] = sorted(set(digests))
    facts = BatchFacts({}, {content_type: set() for content_type in q.TARGET_KINDS}, {},
                       dict.fromkeys(params["list_keys"], 0), 0, None, {})
    kinds = {kind: content_type for content_type, kind in q.TARGET_KINDS.items()}
    if conn.dialect.name == "postgresql":
        rows = prepared.run(conn, q.BATCH_FACTS_PREPARED, params)
    else:
        rows = list(conn.execute(q.BATCH_FACTS, params))
    for kind, row_id, name, text, number, root, flag, moment in rows:
        if kind == "author":
            facts.authors[row_id] = Author(name, text)
        elif kind in kinds:
            facts.targets[kinds[kind]].add(row_id)
        elif kind == "parent":
            facts.parents[row_id] = _Parent(name, number, root or row_id, bool(flag))
        elif kind == "list":
            facts.sizes[name] = number
        elif kind == "key":
            facts.keys[name] = row_id
        else:  # top
            facts.max_id, facts.newest_date = row_id, moment
    return facts


def check_batch(facts: BatchFacts, posts: Sequence[store.NewComment],
                host_check: HostCheck | None = None
                ) -> list[ValidationFailed | store.NewComment]:
    """``check`` for every post of a batch, from the batch's facts: each post's 400, or
    the post to write, a reply to a reply made a reply to its thread's root (replies nest
    one level). A host's own content types are asked of its function."""
    checked: list[ValidationFailed | store.NewComment] = []
    for post in posts:
        refusal = None
        if not _target_found(facts, post, host_check):
            refusal = ValidationFailed({"object_id": [_missing(post.object_id)]})
        elif post.parent_id is not None:
            parent = facts.parents.get(post.parent_id)
            if parent is None:
                refusal = ValidationFailed({"parent": [_missing(post.parent_id)]})
            elif (parent.content_type, parent.object_id) != (post.content_type,
                                                             post.object_id):
                refusal = ValidationFailed(
                    {"parent": ["The parent comment is on another object."]})
            elif parent.is_deleted:
                refusal = ValidationFailed(
                    {"parent": ["A deleted comment cannot be replied to."]})
            else:
                post = replace(post, parent_id=parent.root)
        checked.append(refusal or post)
    return checked


def _target_found(facts: BatchFacts, post: store.NewComment,
                  host_check: HostCheck | None) -> bool:
    if not _valid_id(post.object_id):
        return False
    if post.content_type in facts.targets:
        return post.object_id in facts.targets[post.content_type]
    return host_check is not None and bool(host_check(post.content_type, post.object_id))


def write_batch(conn: Connection, facts: BatchFacts, posts: Sequence[store.NewComment],
                settings: Settings) -> list[tuple[store.Comment, str]]:
    """Write posts that ``check_batch`` passed (their authors in ``facts.authors``), each
    with its stored render and its comment.created event; the comments as lists show
    them, in order, each with its stored render.

    The ids and the date are decided here, under the writers' lock: each post gets the
    next id and the batch's one date, so each is the newest comment of its three lists
    and goes on top of them (position = size + 1, the sizes read with the facts). On
    PostgreSQL the comments, their lists' sizes and their events are written in one
    statement. Only a clock behind the site's newest comment (a slow clock, a comment
    imported with a later date) sends a batch the slow way, one post at a time
    (store.add_comment), which makes room below the later comments; and so do ids that
    would pass the largest one (an import took it), which take free ids below it.
    """
    if not posts:
        return []
    renderer = renders.for_settings(settings)
    legacy = renders.legacy_keys(conn)
    now = datetime.now(UTC).replace(tzinfo=None)
    if (facts.newest_date is not None and now < facts.newest_date) \
            or facts.max_id > INT64_MAX - len(posts):
        return [_write_one(conn, post, renderer) for post in posts]
    sizes = dict(facts.sizes)
    rows, made = [], []
    for offset, post in enumerate(posts, start=1):
        comment = _comment(post, facts.max_id + offset, facts.authors[post.author_id], now)
        positions = []
        for key in (c.key for c in lists_of(post.content_type, post.object_id)):
            sizes[key] += 1
            positions.append(sizes[key])
        shown, shown_key = renderer.render(comment, legacy)
        rows.append({
            "id": comment.id, "content_type": post.content_type, "object_id": post.object_id,
            "parent_id": comment.parent_id, "author_id": post.author_id, "body": post.body,
            "date_added": now, "is_anonymous": post.is_anonymous,
            "site_pos": positions[0], "kind_pos": positions[1], "target_pos": positions[2],
            "shown": shown, "shown_key": shown_key})
        made.append((comment, shown))
    grown = [{"list_key": key, "added": sizes[key] - facts.sizes[key]}
             for key in sizes if sizes[key] != facts.sizes[key]]
    events = outbox.created_rows([(_subject(comment, post), shown)
                                  for (comment, shown), post in zip(made, posts, strict=True)])
    if conn.dialect.name == "postgresql":
        prepared.run(conn, q.WRITE_BATCH, {**_arrays(rows), **_arrays(grown), **_arrays(
            [{**event, "event_comment_id": event["comment_id"]} for event in events],
            skip={"comment_id"}), "first_version": store.first_version()})
    else:
        for row in rows:
            conn.execute(q.INSERT_COMMENT, row)
        first_version = store.first_version()
        for grow in grown:
            conn.execute(q.GROW_LIST, {**grow, "first_version": first_version})
        outbox.insert_rows(conn, events)
    return made


def _arrays(rows: list[dict[str, Any]], skip: frozenset[str] | set[str] = frozenset()
            ) -> dict[str, list[Any]]:
    """Rows as one array per column (the form PostgreSQL's unnest takes)."""
    return {name: [row[name] for row in rows] for name in rows[0] if name not in skip}


def _comment(post: store.NewComment, comment_id: int, author: Author,
             date_added: datetime) -> store.Comment:
    return store.Comment(
        id=comment_id, parent_id=post.parent_id, author_id=post.author_id,
        username=author.username, avatar=author.avatar, body=post.body,
        date_added=date_added, is_deleted=False, is_anonymous=post.is_anonymous,
        is_read=False, replies=[] if post.parent_id is None else None)


def _subject(comment: store.Comment, post: store.NewComment) -> Subject:
    return Subject(comment.id, post.content_type, post.object_id, comment.parent_id)


def _write_one(conn: Connection, post: store.NewComment,
               renderer: renders.Renderer) -> tuple[store.Comment, str]:
    """One post the slow way (see write_batch): placed by
    store.add_comment, which makes room for it, then rendered and its event recorded."""
    comment = store.one(conn, store.add_comment(conn, replace(post, date_added=None)))
    if comment is None:  # written in this very transaction
        raise LookupError(post)
    shown = renderer.save_one(conn, comment)
    outbox.insert_rows(conn, outbox.created_rows([(_subject(comment, post), shown)]))
    return comment, shown
