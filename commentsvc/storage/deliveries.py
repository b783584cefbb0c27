"""Where each webhook endpoint stands in the events, kept in the database so that any
deliverer, on any node, can go on where another stopped (docs/EVENTS.md).

An endpoint gets the events in id order, one at a time: ``delivered_through`` is the last
one it accepted (or was given up on). A deliverer sends to an endpoint only under a lease
(``claim``), renewed by each delivery; one that dies mid-send is taken over when its
lease runs out, and the event it was sending is sent again (at least once). Each step is
its own short transaction: no transaction stays open while a receiver is being waited for.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection, Engine

from commentsvc.storage.queries import deliveries as q


@dataclass(frozen=True, slots=True)
class Claim:
    """An endpoint this deliverer holds: where it stands and how its next event fared."""

    url: str
    owner: str
    delivered_through: int
    attempts: int
    first_failure: datetime | None


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event as the deliverer sends it."""

    id: int
    uid: str
    type: str
    payload: str


def register(engine: Engine, urls: tuple[str, ...], now: datetime,
             only_these: bool = True) -> None:
    """Make ``urls`` active endpoints (a new one starts before the first event kept);
    ``only_these``: the only ones, so an endpoint no longer configured stops holding
    events back from pruning and alarming the events command (its place stays, should
    it come back)."""
    with engine.begin() as conn:
        for url in urls:
            conn.execute(q.REGISTER, {"url": url, "now": now})
        if only_these:
            conn.execute(q.DEACTIVATE_OTHERS, {"urls": list(urls) or [""]})


def claim(engine: Engine, url: str, owner: str, now: datetime,
          lease_seconds: float) -> Claim | None:
    """Take ``url`` for ``lease_seconds`` if its next attempt is due and no other
    deliverer's lease on it runs; None otherwise."""
    statement = q.CLAIM_POSTGRESQL if engine.dialect.name == "postgresql" else q.CLAIM_SQLITE
    with engine.begin() as conn:
        taken = conn.execute(statement, {"url": url, "owner": owner, "now": now,
                                         "until": now + timedelta(seconds=lease_seconds)})
        if taken.rowcount != 1:
            return None
        row = conn.execute(q.CLAIMED, {"url": url, "owner": owner}).one()
    return Claim(url, owner, int(row.delivered_through), int(row.attempts), row.first_failure)


def events_after(engine: Engine, after: int, batch: int) -> list[StoredEvent]:
    """The next ``batch`` events after id ``after``, in order."""
    with engine.connect() as conn:
        rows = conn.execute(q.EVENTS_AFTER, {"after": after, "batch": batch}).all()
    return [StoredEvent(int(r.id), r.event_uid, r.event_type, r.payload) for r in rows]


def delivered(engine: Engine, held: Claim, event_id: int, now: datetime,
              lease_seconds: float) -> bool:
    """The endpoint accepted ``event_id``; False if the lease was lost meanwhile (another
    deliverer goes on from where the endpoint stands)."""
    return _change(engine, q.DELIVERED, {
        "url": held.url, "owner": held.owner, "event_id": event_id,
        "until": now + timedelta(seconds=lease_seconds)})


def failed(engine: Engine, held: Claim, error: str, now: datetime,
           next_attempt: datetime) -> bool:
    """An attempt failed: the endpoint is tried again at ``next_attempt``; the lease is
    given back meanwhile."""
    return _change(engine, q.FAILED, {"url": held.url, "owner": held.owner,
                                      "error": error[:1000], "now": now,
                                      "next_attempt": next_attempt})


def give_up(engine: Engine, held: Claim, event_id: int, attempts: int, error: str,
            now: datetime, lease_seconds: float) -> bool:
    """``event_id`` failed for the whole retry window: keep it as given up and move the
    endpoint past it, in one transaction."""
    with engine.begin() as conn:
        moved = conn.execute(q.PASSED_GIVEN_UP, {
            "url": held.url, "owner": held.owner, "event_id": event_id,
            "error": error[:1000], "until": now + timedelta(seconds=lease_seconds)})
        if moved.rowcount != 1:  # the lease was lost: nothing was changed
            return False
        conn.execute(q.GIVEN_UP, {"url": held.url, "event_id": event_id,
                                  "attempts": attempts, "error": error[:1000], "now": now})
    return True


def release(engine: Engine, url: str, owner: str) -> None:
    """Give the lease on ``url`` back (nothing to send, or stopping)."""
    with engine.begin() as conn:
        conn.execute(q.RELEASE, {"url": url, "owner": owner})


def _change(engine: Engine, statement: Any, params: dict[str, Any]) -> bool:
    with engine.begin() as conn:
        return bool(conn.execute(statement, params).rowcount == 1)


@dataclass(frozen=True, slots=True)
class EndpointState:
    """An endpoint as the events command and the metrics show it."""

    url: str
    active: bool
    delivered_through: int
    attempts: int
    first_failure: datetime | None
    next_attempt: datetime
    last_error: str | None
    lease_owner: str | None
    lease_until: datetime | None
    delivered: int
    failed_attempts: int
    given_up: int
    pending: int
    oldest_pending: datetime | None

    def lag_seconds(self, now: datetime) -> float:
        """How long the oldest event this endpoint lacks has waited (0 when none)."""
        if self.oldest_pending is None:
            return 0.0
        return max(0.0, (now - self.oldest_pending).total_seconds())

    @property
    def failing(self) -> bool:
        return self.attempts > 0


def urls(engine: Engine) -> list[str]:
    """Every endpoint's URL, active or not."""
    with engine.connect() as conn:
        return [row.url for row in conn.execute(q.URLS)]


def states(conn: Connection) -> list[EndpointState]:
    """Every endpoint, active or not, by URL."""
    return [EndpointState(
        row.url, bool(row.active), int(row.delivered_through), int(row.attempts),
        row.first_failure, row.next_attempt, row.last_error, row.lease_owner,
        row.lease_until, int(row.delivered), int(row.failed_attempts), int(row.given_up),
        int(row.pending), row.oldest_pending) for row in conn.execute(q.STATES)]


@dataclass(frozen=True, slots=True)
class GivenUp:
    """An event an endpoint never accepted within the retry window."""

    url: str
    event_id: int
    event_uid: str | None  # None once the event itself was pruned
    event_type: str | None
    attempts: int
    last_error: str | None
    given_up_at: datetime


def given_up(conn: Connection, limit: int = 100) -> list[GivenUp]:
    """The events given up on, newest first."""
    return [GivenUp(row.url, int(row.event_id), row.event_uid, row.event_type,
                    int(row.attempts), row.last_error, row.given_up_at)
            for row in conn.execute(q.GIVEN_UP_EVENTS, {"limit": limit})]
