"""Deterministic demo data: realistic users, comic pages and comment threads.

Everything comes from one ``random.Random(seed)`` and a fixed end date, so a seed always
gives the same data (ids aside, which start after the tables' current maximum). Rows
are generated lazily and streamed through copy_rows.insert_rows (COPY on PostgreSQL), so a
million comments take seconds and constant memory.
"""

from __future__ import annotations

import json
import random
import sys
from bisect import bisect
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from functools import cache
from itertools import accumulate
from pathlib import Path
from typing import Any, cast

import click
from sqlalchemy.engine import Connection

from commentsvc import settings
from commentsvc.interchange import copy_rows, empty_table
from commentsvc.operations import progress as show_progress
from commentsvc.rules.identifiers import INT64_MAX, PAGE_TYPE, USER_TYPE
from commentsvc.storage import store
from commentsvc.storage.queries import interchange as q

VOCABULARY_FILE = Path(__file__).resolve().parent.parent / "seeds" / "vocabulary.json"

# Dates end here, not at "now", so the same seed gives the same data on any day.
END = datetime(2026, 1, 1)
SPAN = timedelta(days=730)

REPLY_SHARE = 0.3
PROGRESS_THRESHOLD = 100_000  # comments; below this the bar would only flicker
PROGRESS_STEP = 10_000
MAX_USERS = 200_000
# The most targets a seed spreads comments over: each user target is a user of its own,
# so this also bounds the users it adds (a target count past it would not finish).
MAX_TARGETS = 1_000_000


def has_comments(conn: Connection) -> bool:
    """Whether any comment is stored (seed --if-empty leaves such a database alone)."""
    return not empty_table.comments_empty(conn)


def seed(conn: Connection, *, comments: int, targets: int, seed: int,
         progress: bool | None = None, content_types: Iterable[str] | None = None,
         hot_share: float = 0.0,
         render: Callable[[store.Comment], tuple[str, str]] | None = None) -> str:
    """Add demo users, comic pages and ``comments`` comments on ``targets`` targets.

    Returns a one-line summary. ``progress`` (default: above PROGRESS_THRESHOLD comments,
    when stderr is a terminal) draws a bar on stderr; ``content_types`` defaults to the
    setting's default (the seed command passes the app's).
    ``hot_share`` gives the most popular target that share of all comments (a viral
    page), on top of the usual long tail; 0 leaves popularity to the long tail alone.
    ``render`` gives a comment's stored render and its key (the seed command passes
    storage.renders'), stored with it.
    """
    if comments < 0 or targets < 1:
        raise ValueError("seeding needs comments >= 0 and targets >= 1")
    if not 0.0 <= hot_share <= 1.0:
        raise ValueError("hot_share must be between 0 and 1")
    if content_types is None:
        content_types = settings.BY_NAME["CONTENT_TYPES"].default
    user_targets, page_targets = _split_targets(targets, frozenset(content_types))
    rng = random.Random(seed)
    words = _vocabulary()
    max_user, max_page, max_comment = conn.execute(q.MAX_IDS).one()

    n_users = max(user_targets, min(10 + comments // 8, MAX_USERS))
    if max(max_user + n_users, max_page + page_targets, max_comment + comments) > INT64_MAX:
        raise click.ClickException(
            "seed adds ids after the largest stored ones, and there is no room for them "
            f"below {INT64_MAX}: nothing seeded")
    # Names already stored (an earlier seeding, an import) are taken too.
    taken = set(conn.scalars(q.USERNAMES)) if max_user else set()
    authors: dict[int, tuple[str, str | None]] = {}
    copy_rows.insert_rows(conn, q.USER_TABLE, q.USER_COLUMNS,
                     _kept(_users(rng, words, max_user + 1, n_users, taken), authors))
    copy_rows.insert_rows(conn, q.PAGE_TABLE, q.PAGE_COLUMNS,
                     _pages(rng, words, max_page + 1, page_targets))

    user_ids = range(max_user + 1, max_user + n_users + 1)
    chosen = [(USER_TYPE, uid) for uid in rng.sample(user_ids, user_targets)]
    chosen += [(PAGE_TYPE, max_page + 1 + k) for k in range(page_targets)]
    rng.shuffle(chosen)  # popularity follows this order, so mix users and pages

    generator = _CommentGenerator(rng, words, chosen, user_ids, max_comment + 1, hot_share)
    rows: Iterable[tuple[Any, ...]] = generator.rows(comments)
    columns: tuple[str, ...] = q.COMMENT_COLUMNS
    if render is not None:
        rows, columns = _rendered(rows, authors, render), (*columns, *q.RENDER_COLUMNS)
    if progress is None:
        progress = comments > PROGRESS_THRESHOLD and show_progress.on_terminal()
    with empty_table.deferred_indexes(conn) as first_load:
        if progress:
            with click.progressbar(length=comments, label="Seeding comments",
                                   file=sys.stderr) as bar:
                copy_rows.insert_rows(conn, q.COMMENT_TABLE, columns,
                                      _reporting(rows, bar.update))
            click.echo("Building indexes and counting lists..." if first_load
                       else "Numbering the lists again (the indexes were kept)...", err=True)
        else:
            copy_rows.insert_rows(conn, q.COMMENT_TABLE, columns, rows)
    if first_load:
        store.recount(conn)  # the generator numbered the rows as an empty table's
    else:
        store.renumber(conn)
    return (f"Seeded {n_users} users, {page_targets} comic pages and {comments} comments "
            f"({generator.replies} replies) on {targets} targets with seed {seed}.")


def _kept(users: Iterable[tuple[int, str, str | None]],
          authors: dict[int, tuple[str, str | None]]) -> Iterator[tuple[int, str, str | None]]:
    """The same user rows, each name and avatar noted in ``authors`` by id."""
    for uid, name, avatar in users:
        authors[uid] = (name, avatar)
        yield uid, name, avatar


def _rendered(rows: Iterable[tuple[Any, ...]], authors: dict[int, tuple[str, str | None]],
              render: Callable[[store.Comment], tuple[str, str]]) -> Iterator[tuple[Any, ...]]:
    """Comment rows (q.COMMENT_COLUMNS) with their stored render and key after them."""
    for row in rows:
        cid, _ct, _oid, parent_id, author_id, body, date_added, deleted, anonymous, read = row[:10]
        name, avatar = authors[author_id]
        yield (*row, *render(store.Comment(cid, parent_id, author_id, name, avatar, body,
                                           date_added, deleted, anonymous, read)))


def _split_targets(targets: int, content_types: frozenset[str]) -> tuple[int, int]:
    """How many targets are user profiles and how many comic pages (both when possible)."""
    has_users, has_pages = USER_TYPE in content_types, PAGE_TYPE in content_types
    if not (has_users or has_pages):
        raise click.UsageError(f"seeding needs {USER_TYPE} or {PAGE_TYPE} in CONTENT_TYPES")
    if not has_pages:
        return targets, 0
    if not has_users or targets < 2:
        return 0, targets
    users = max(1, targets // 4)  # a comic site: most comments are on its pages
    return users, targets - users


def _reporting(rows: Iterable[tuple[Any, ...]],
               update: Callable[[int], None]) -> Iterator[tuple[Any, ...]]:
    """The same rows, advancing the progress bar every PROGRESS_STEP of them."""
    done = 0
    for done, row in enumerate(rows, start=1):
        yield row
        if done % PROGRESS_STEP == 0:
            update(PROGRESS_STEP)
    update(done % PROGRESS_STEP)


@cache
def _vocabulary() -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads(VOCABULARY_FILE.read_text(encoding="utf-8")))


def _zipf_weights(n: int, exponent: float) -> list[float]:
    """Cumulative weights where rank k is chosen about 1/k**exponent as often as rank 1."""
    return list(accumulate(1.0 / (rank ** exponent) for rank in range(1, n + 1)))


def _users(rng: random.Random, words: dict[str, Any], first_id: int, n: int,
           taken: set[str] | None = None) -> Iterator[tuple[int, str, str | None]]:
    """(id, username, avatar) rows; names are unique, also against ``taken`` ones."""
    seen: set[str] = set() if taken is None else taken
    for uid in range(first_id, first_id + n):
        base = name = _username(rng, words)
        copy = 1
        while name in seen:
            copy += 1
            name = f"{base} {copy}" if " " in base.strip() else f"{base}{copy}"
        seen.add(name)
        yield uid, name, _avatar(rng, words)


def _username(rng: random.Random, words: dict[str, Any]) -> str:
    first: str = rng.choice(words["first_names"])  # the vocabulary's words are str
    last: str = rng.choice(words["last_names"])
    r = rng.random()
    if r < 0.30:
        return f"{first} {last}"
    if r < 0.42:
        return f"{first}.{last}".lower()
    if r < 0.72:
        left, right = rng.choice(words["handle_words"]), rng.choice(words["handle_words"])
        tail = str(rng.randint(1, 999)) if rng.random() < 0.5 else ""
        return f"{left}_{right}{tail}" if rng.random() < 0.5 else f"{left}{right}{tail}"
    if r < 0.88:
        return first
    if r < 0.98:
        return f"{first}{last[0]}"
    odd: str = rng.choice(words["odd_usernames"])
    return odd


def _avatar(rng: random.Random, words: dict[str, Any]) -> str | None:
    r = rng.random()
    if r < 0.12:
        return None
    ext = rng.choice(words["avatar_extensions"])
    if r < 0.45:
        return f"IMG_{rng.randint(1000, 9999)}.{ext}"
    if r < 0.75:
        return f"{rng.choice(words['handle_words'])}.{ext}"
    if r < 0.95:
        return f"profile.{ext}"
    return f"avatar final ({rng.randint(2, 9)}).{ext}"


def _pages(rng: random.Random, words: dict[str, Any], first_id: int,
           n: int) -> Iterator[tuple[int, str]]:
    """(id, title) rows: pages of a few series, numbered in reading order per series."""
    read: dict[str, int] = {}
    for pid in range(first_id, first_id + n):
        series = rng.choice(words["comic_series"])
        chapter, page = divmod(read.get(series, 0), 24)
        read[series] = read.get(series, 0) + 1
        where = "cover" if page == 0 else f"page {page}"
        yield pid, f"{series} — Chapter {chapter + 1}, {where}"


class _CommentGenerator:
    """Comments in time order, so ids, dates and list positions all grow together.

    Positions are written as they will be for an empty table, so a first load needs only
    its lists counted; on a table with comments store.renumber corrects them.
    """

    def __init__(self, rng: random.Random, words: dict[str, Any],
                 targets: list[tuple[str, int]], user_ids: range, first_id: int,
                 hot_share: float = 0.0) -> None:
        self.rng = rng
        self.words = words
        self.targets = targets
        self.target_weights = _zipf_weights(len(targets), 0.9)
        self.user_ids = user_ids
        self.author_weights = _zipf_weights(len(user_ids), 0.8)
        self.first_id = first_id
        self.hot_share = hot_share
        self.replies = 0

    def rows(self, n: int) -> Iterator[tuple[Any, ...]]:
        """(id, content_type, object_id, parent_id, author_id, body, date_added,
        is_deleted, is_anonymous, is_read, site_pos, kind_pos, target_pos) rows."""
        rng, random_ = self.rng, self.rng.random
        targets, target_weights, hot_share = self.targets, self.target_weights, self.hot_share
        target_total = target_weights[-1] if target_weights else 0.0
        user_ids, author_weights = self.user_ids, self.author_weights
        author_total = author_weights[-1]
        start, span_us = END - SPAN, SPAN // timedelta(microseconds=1)
        recent_roots: dict[int, deque[int]] = {}
        kind_pos: dict[str, int] = {}
        target_pos: dict[int, int] = {}
        previous = start
        for i in range(n):
            # Ever more comments as the comic grows: the i-th of n falls at fraction
            # x**0.77 of the span; a few share their predecessor's time (ties by id).
            if i and random_() < 0.04:
                date_added = previous
            else:
                x = (i + random_()) / n
                date_added = start + timedelta(microseconds=int(span_us * x ** 0.77))
                if random_() < 0.5:  # older imports kept whole seconds only
                    date_added = date_added.replace(microsecond=0)
                date_added = max(date_added, previous)
            previous = date_added

            if hot_share and random_() < hot_share:
                t = 0
            else:
                t = bisect(target_weights, random_() * target_total)
            content_type, object_id = targets[min(t, len(targets) - 1)]
            roots = recent_roots.get(t)
            comment_id = self.first_id + i
            if roots and random_() < REPLY_SHARE:
                # Replies mostly answer the latest threads of the target.
                parent_id = roots[-1 - int(len(roots) * random_() ** 2)]
                self.replies += 1
            else:
                parent_id = None
                if roots is None:
                    roots = recent_roots[t] = deque(maxlen=20)
                roots.append(comment_id)
            author_id = user_ids[min(bisect(author_weights, random_() * author_total),
                                     len(user_ids) - 1)]
            kind_pos[content_type] = kind_pos.get(content_type, 0) + 1
            target_pos[t] = target_pos.get(t, 0) + 1
            body = _body(rng, self.words)
            is_deleted = random_() < 0.02  # drawn after the body: the same data as before
            yield (comment_id, content_type, object_id, parent_id, author_id,
                   "" if is_deleted else body, date_added,
                   is_deleted, random_() < 0.03,
                   random_() < 0.9 - 0.6 * i / n,  # old comments are mostly read
                   i + 1, kind_pos[content_type], target_pos[t])


def _fill(rng: random.Random, words: dict[str, Any], template: str) -> str:
    """Replace each {character}, {link}, {n} and {word} of a template by its own draw."""
    while "{" in template:
        if "{character}" in template:
            key, value = "{character}", rng.choice(words["characters"])
        elif "{link}" in template:
            key, value = "{link}", _fill(rng, words, rng.choice(words["links"]))
        elif "{n}" in template:
            key, value = "{n}", str(rng.randint(1, 400))
        elif "{word}" in template:
            key, value = "{word}", rng.choice(words["handle_words"])
        else:
            break
        template = template.replace(key, value, 1)
    return template


def _sentence(rng: random.Random, words: dict[str, Any], kind: str) -> str:
    text = _fill(rng, words, rng.choice(words[kind]))
    return text[:1].upper() + text[1:]


def _body(rng: random.Random, words: dict[str, Any]) -> str:
    """A comment as people write them: mostly short, some links, breaks, quotes, markup."""
    r = rng.random()
    if r < 0.12:
        body: str = rng.choice(words["short_comments"])
    elif r < 0.42:
        body = _sentence(rng, words, "reactions")
        if rng.random() < 0.4:
            body += " " + rng.choice(words["closers"])
    elif r < 0.56:
        opener = rng.choice(words["openers"])
        reaction = _fill(rng, words, rng.choice(words["reactions"]))
        if opener.endswith((".", "!", "?")):
            reaction = reaction[:1].upper() + reaction[1:]
        body = f"{opener} {reaction} {_sentence(rng, words, 'questions')}"
    elif r < 0.66:
        body = _fill(rng, words, rng.choice(words["link_lead_ins"]))
        if rng.random() < 0.3:
            body = _sentence(rng, words, "reactions") + " " + body
    elif r < 0.78:
        newline = "\r\n" if rng.random() < 0.15 else "\n"
        gap = newline * rng.choice((1, 1, 2))
        parts = [_sentence(rng, words, "reactions"), _sentence(rng, words, "questions")]
        if rng.random() < 0.5:
            parts.append(rng.choice(words["closers"]))
        body = gap.join(parts)
    elif r < 0.85:
        quoted = _fill(rng, words, rng.choice(words["reactions"]))
        if rng.random() < 0.5:
            body = f"\"{quoted[:1].upper()}{quoted[1:]}\" — {rng.choice(words['short_comments'])}"
        else:
            body = f"> {quoted}\n{_sentence(rng, words, 'reactions')}"
    elif r < 0.91:
        body = _fill(rng, words, rng.choice(words["html_like"]))
    else:
        body = _sentence(rng, words, "questions")
    if rng.random() < 0.08:
        body += " " + rng.choice(words["emoji"])
    return body
