"""Command-line commands of events (docs/EVENTS.md): `flask --app app deliver` runs the
deliverer; `flask --app app events` shows where every webhook endpoint stands and what is
failing."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from datetime import timedelta
from types import FrameType

import click
from flask.cli import with_appcontext

from commentsvc.operations import option_checks
from commentsvc.operations.deliverer import Deliverer
from commentsvc.rules import endpoint_urls
from commentsvc.storage import deliveries, engine, outbox
from commentsvc.web import current


@click.command("deliver")
@with_appcontext
@click.option("--once", is_flag=True,
              help="Send what is due now to every endpoint, then exit.")
def deliver_command(once: bool) -> None:
    """POST every event to each endpoint of COMMENTSVC_WEBHOOK_URLS, signed, in order, at
    least once; runs until stopped (SIGTERM or Ctrl-C). One per node is plenty; several
    share the endpoints between them. Its endpoints become the only active ones (with
    --once: they are added to them). Exit status 2 when it cannot deliver (no endpoint,
    no secret, a lease no longer than the timeout)."""
    settings = current.service().settings
    problem = (
        "COMMENTSVC_WEBHOOK_URLS is empty: there is no endpoint to deliver to."
        if not settings.webhook_urls else
        "COMMENTSVC_WEBHOOK_SECRET is empty: webhooks must be signed."
        if not settings.webhook_secret else
        "COMMENTSVC_WEBHOOK_LEASE_SECONDS must be longer than "
        "COMMENTSVC_WEBHOOK_TIMEOUT_SECONDS: a lease must outlast one attempt."
        if settings.webhook_lease_seconds <= settings.webhook_timeout_seconds else None)
    if problem:
        click.echo(f"Cannot deliver: {problem}", err=True)
        sys.exit(2)
    if not (logging.getLogger().handlers or logging.getLogger("commentsvc").handlers):
        # a host app without logging of its own: plain lines on stderr (the standalone
        # app already writes the service's JSON log lines there)
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s %(message)s")
    with engine.get_engine().begin() as conn:
        engine.one_schema_change_at_a_time(conn)  # started with the service, on a new database
        engine.create_schema(conn)
    deliverer = Deliverer(engine.get_engine(), settings)
    deliverer.register(only_these=not once)
    if once:
        accepted = deliverer.run_once()
        deliverer.prune()
        click.echo(f"Delivered {accepted} event(s).")
        return
    stop = threading.Event()

    def stopping(_signal: int, _frame: FrameType | None) -> None:
        stop.set()

    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, stopping)
    click.echo(f"Delivering events to {len(settings.webhook_urls)} endpoint(s) "
               f"as {deliverer.owner}.", err=True)
    deliverer.run(stop)
    click.echo("Stopped.", err=True)


# About a century: a longer look back is a mistyped value (and past timedelta's range).
MAX_ALARM_HOURS = 1_000_000.0


@click.command("events")
@with_appcontext
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1),
              help="Most events given up on to list, newest first.")
@click.option("--alarm-hours", default=24.0, show_default=True,
              type=click.FloatRange(min=0, max=MAX_ALARM_HOURS), callback=option_checks.finite,
              help="Events given up on this recently make the exit status 1.")
def events_command(limit: int, alarm_hours: float) -> None:
    """Where each webhook endpoint stands: events delivered, waiting and failed, its lag,
    its failing event and its last error; then the events given up on. Exit status 1 when
    a configured endpoint is failing or an event was given up on in the last
    --alarm-hours (a monitoring check); 0 otherwise."""
    now = outbox.now()
    with engine.get_engine().begin() as conn:
        engine.one_schema_change_at_a_time(conn)
        engine.create_schema(conn)
        kept, newest = outbox.totals(conn)
        endpoints = deliveries.states(conn)
        abandoned = deliveries.given_up(conn, limit)
    # named as /metrics names them, without secrets: the full URLs are in the settings
    names = endpoint_urls.labels([*(s.url for s in endpoints), *(i.url for i in abandoned)])
    click.echo(f"Events: {kept} kept, newest id {newest}.")
    if not endpoints:
        click.echo("No webhook endpoint has been delivered to yet.")
    for state in endpoints:
        status = ("failing" if state.failing else "ok") + ("" if state.active else
                                                          ", not configured")
        click.echo(f"{names[state.url]} [{status}] delivered {state.delivered}, waiting "
                   f"{state.pending}, lag {state.lag_seconds(now):.1f} s, failed attempts "
                   f"{state.failed_attempts}, given up {state.given_up}")
        if state.failing:
            click.echo(f"  event {state.delivered_through + 1}: {state.attempts} failed "
                       f"attempt(s) since {state.first_failure:%Y-%m-%d %H:%M:%S} UTC, next "
                       f"at {state.next_attempt:%Y-%m-%d %H:%M:%S} UTC: "
                       f"{_error(state.last_error, state.url)}")
    if abandoned:
        click.echo("Given up on (newest first):")
    for item in abandoned:
        click.echo(f"  {item.given_up_at:%Y-%m-%d %H:%M:%S} UTC {names[item.url]} event "
                   f"{item.event_id} {item.event_type or '(pruned)'} {item.event_uid or ''} "
                   f"after {item.attempts} attempt(s): {_error(item.last_error, item.url)}")
    recent = now - timedelta(hours=alarm_hours)
    if (any(state.failing and state.active for state in endpoints)
            or any(item.given_up_at >= recent for item in abandoned)):
        sys.exit(1)


def _error(error: str | None, url: str) -> str:
    """An error as kept, without the endpoint's secrets (kept before they were taken out)."""
    return endpoint_urls.scrubbed(error or "", url)


COMMANDS = (deliver_command, events_command)
