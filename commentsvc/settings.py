"""Every setting of the service, declared once: name, default, parser and help.

Standalone, settings come from environment variables named ``COMMENTSVC_<NAME>``
(``DATABASE_URL`` and ``DATABASE_REPLICA_URLS`` have no prefix). Mounted in a host site,
the host may put the same ``COMMENTSVC_<NAME>`` keys in its Flask config. Either way they
are checked at start-up, so a bad value stops the service with a clear message instead of
failing on a request.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from limits import parse_many
from limits.storage import storage_from_string
from werkzeug.utils import import_string

from commentsvc.rules.endpoint_urls import shown
from commentsvc.rules.identifiers import BUILT_IN_CONTENT_TYPES
from commentsvc.rules.rendered import display_key
from commentsvc.storage.database_urls import POSTGRES_SPELLINGS, is_postgres, normalise_url

PREFIX = "COMMENTSVC_"


class SettingsError(ValueError):
    """A setting has a value the service cannot run with."""


def _positive_int(raw: Any) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError("must be a whole number of at least 1")
    return value


def _non_negative_int(raw: Any) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError("must be a whole number of at least 0")
    return value


def _seconds(raw: Any) -> float:
    """A number of seconds, decimals allowed: "2", "0.5"."""
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a number of seconds of at least 0")
    return int(value) if value.is_integer() else value


def _positive_seconds(raw: Any) -> float:
    value = _seconds(raw)
    if value == 0:
        raise ValueError("must be a number of seconds above 0")
    return value


def _flag(raw: Any) -> bool:
    """True or False, also spelled 1/0, yes/no, on/off in the environment."""
    if isinstance(raw, bool):
        return raw
    value = str(raw).strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError("must be true or false (1/0, yes/no, on/off)")


def _time_zone(raw: Any) -> str:
    try:
        ZoneInfo(str(raw))
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {raw!r}") from exc
    return str(raw)


def _label_list(raw: Any) -> tuple[str, ...]:
    parts: list[str] = raw.split(",") if isinstance(raw, str) else list(raw)
    labels = tuple(label.strip() for label in parts if label.strip())
    for label in labels:
        app_label, dot, model = label.partition(".")
        if not (app_label and dot and model) or "." in model:
            raise ValueError(f"{label!r} is not of the form app_label.model_name")
    if not labels:
        raise ValueError("must name at least one content type")
    return labels


def _path(raw: Any) -> str:
    value = str(raw)
    if not value.startswith("/"):
        raise ValueError("must be a path starting with /")
    return value


def _rate(raw: Any) -> str:
    """A rate such as "10/minute" or "5 per 30 seconds" (the limits library's notation);
    empty turns the limit off."""
    value = str(raw).strip()
    if value:
        try:
            parse_many(value)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a rate such as 10/minute") from exc
    return value


def _storage_uri(raw: Any) -> str:
    value = str(raw)
    try:
        storage_from_string(value)
    except Exception as exc:  # noqa: BLE001 - any failure means it cannot be used
        raise ValueError(f"not a usable rate-limit storage: {exc}") from exc
    return value


def _database_url(raw: Any) -> str:
    """A supported database URL with its driver named (database_urls); empty is SQLite."""
    value = str(raw).strip()
    return normalise_url(value) if value else ""


def _replica_urls(raw: Any) -> tuple[str, ...]:
    """PostgreSQL URLs separated by commas or white space, each with its driver named;
    empty means no replicas."""
    urls = raw.replace(",", " ").split() if isinstance(raw, str) else list(raw)
    named = tuple(normalise_url(str(url)) for url in urls)
    for url in named:
        if not is_postgres(url):
            *others, last = (f"{scheme}://..." for scheme in POSTGRES_SPELLINGS)
            raise ValueError(f"a replica must be a PostgreSQL URL: {', '.join(others)} or {last}")
    return named


def _redis_url(raw: Any) -> str:
    value = str(raw).strip()
    if value and not value.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError("must be a redis:// URL, or empty")
    return value


# An explicit key must be as hard to guess as the generated one (secrets.token_hex(32)).
MIN_SECRET_KEY_LENGTH = 32


def _webhook_urls(raw: Any) -> tuple[str, ...]:
    """http(s) URLs separated by commas or white space; empty means no webhooks."""
    urls = raw.replace(",", " ").split() if isinstance(raw, str) else [str(u) for u in raw]
    for url in urls:
        scheme, _, rest = url.partition("://")
        if scheme.lower() not in ("http", "https") or not rest.split("/")[0]:
            # named without its secrets: an endpoint URL may carry a password or token
            raise ValueError(f"{shown(url)!r} is not an http:// or https:// URL")
    return tuple(dict.fromkeys(urls))  # each endpoint once, in the order given


# A webhook secret must be as hard to guess as a generated one.
MIN_WEBHOOK_SECRET_LENGTH = 24


def _webhook_secret(raw: Any) -> str:
    """Empty (no webhooks can be sent), or a long secret."""
    value = str(raw)
    if value and len(value) < MIN_WEBHOOK_SECRET_LENGTH:
        raise ValueError(f"must be at least {MIN_WEBHOOK_SECRET_LENGTH} characters, e.g. "
                         "the output of: python -c 'import secrets; "
                         "print(secrets.token_hex(32))'")
    return value


def _secret_key(raw: Any) -> str:
    """Empty (a key generated once and kept in the instance folder), or a long key."""
    value = str(raw)
    if value and len(value) < MIN_SECRET_KEY_LENGTH:
        raise ValueError(f"must be at least {MIN_SECRET_KEY_LENGTH} characters, e.g. the "
                         "output of: python -c 'import secrets; print(secrets.token_hex(32))'")
    return value


def _callable(raw: Any) -> Callable[[], Any] | None:
    """A function, or "package.module:function" naming one; empty means none."""
    if raw is None or raw == "":
        return None
    try:
        value: object = import_string(raw) if isinstance(raw, str) else raw
    except ImportError as exc:  # werkzeug's message runs to a dozen lines: keep its cause
        cause = getattr(exc, "exception", exc)
        raise ValueError(f"cannot import it ({type(cause).__name__}: {cause})") from exc
    if not callable(value):
        raise ValueError("must be a function (or the dotted name of one)")
    return value


@dataclass(frozen=True)
class Setting:
    """One setting: its config key, default, parser and the help the README shows."""

    name: str
    default: Any
    parse: Callable[[Any], Any]
    help: str
    secret: bool = False  # its value is never repeated in an error message

    @property
    def key(self) -> str:
        return PREFIX + self.name

    @property
    def env_var(self) -> str:
        return self.name if self.name in UNPREFIXED else self.key


# Read from the environment without the prefix, as hosting platforms name them.
UNPREFIXED = ("DATABASE_URL", "DATABASE_REPLICA_URLS")

SETTINGS: tuple[Setting, ...] = (
    Setting("DATABASE_URL", "", _database_url,
            "SQLAlchemy URL of the database; empty means SQLite in instance/commentsvc.sqlite3. "
            "postgresql:// and postgres:// mean the psycopg2 driver (postgresql+psycopg2://); "
            "any other database or driver stops the service at start-up."),
    Setting("DATABASE_REPLICA_URLS", (), _replica_urls,
            "PostgreSQL streaming replicas (URLs separated by commas) that serve list and "
            "single-comment reads; empty sends everything to DATABASE_URL."),
    Setting("READ_YOUR_WRITES_SECONDS", 10, _seconds,
            "After a user's write, that user's reads go to the primary for this many "
            "seconds; 0 turns it off."),
    Setting("REPLICA_MAX_LAG_SECONDS", 5, _positive_seconds,
            "A replica further behind the primary than this many seconds is not read from."),
    Setting("REPLICA_CHECK_SECONDS", 2, _positive_seconds,
            "How often (seconds) each process checks a replica's lag, or tries again one "
            "that failed."),
    Setting("RESPONSE_CACHE_URL", "", _redis_url,
            "redis://host:6379/0 keeps rendered list pages in Redis, shared by every worker "
            "and node; empty keeps them in each worker (RESPONSE_CACHE_MB)."),
    Setting("PAGE_SIZE", 10, _positive_int, "Comments per page when page_size is not given."),
    Setting("MAX_PAGE_SIZE", 100, _positive_int,
            "Largest page_size a client may ask for; larger requests are clamped to it."),
    Setting("TIME_ZONE", "UTC", _time_zone, "IANA time zone in which date_added is shown."),
    Setting("DEFAULT_AVATAR", "/static/img/default-avatar.png", _path,
            "author_avatar of users without an avatar and of anonymous comments."),
    Setting("CONTENT_TYPES", BUILT_IN_CONTENT_TYPES, _label_list,
            "Comma-separated content types comments may be attached to."),
    Setting("TRUSTED_PROXIES", 0, _non_negative_int,
            "Number of proxies in front of the service whose X-Forwarded-Proto and "
            "X-Forwarded-Host are trusted for page URLs; 0 trusts none."),
    Setting("RETRY_AFTER", 5, _positive_int,
            "Seconds sent in Retry-After while the database is unreachable."),
    Setting("DB_CONNECT_TIMEOUT", 3, _positive_int,
            "Seconds to wait for a PostgreSQL connection before answering 503."),
    Setting("STATEMENT_TIMEOUT_MS", 10000, _non_negative_int,
            "Milliseconds a PostgreSQL statement of a request may run before the server "
            "cancels it (answered 503); 0 sends no statement_timeout. Commands lift it."),
    Setting("IDLE_IN_TRANSACTION_TIMEOUT_MS", 2000, _non_negative_int,
            "Milliseconds a PostgreSQL session may sit idle inside a transaction before the "
            "server ends it (and its locks): a backstop for a client that vanished "
            "mid-write; 0 sends none. Commands lift it."),
    Setting("LOCK_TIMEOUT_MS", 2000, _non_negative_int,
            "Milliseconds a PostgreSQL statement of a request may wait for a lock (the "
            "writers' lock above all) before the server gives up (answered 503): a writer "
            "never queues long behind a stuck one; 0 sends no lock_timeout. Commands lift "
            "it."),
    Setting("DB_RESPONSE_TIMEOUT", 4, _seconds,
            "Seconds a request waits for any one answer from PostgreSQL (the writers' lock "
            "may take LOCK_TIMEOUT_MS more) before it takes the database for hung: "
            "the connection is closed and the request answered 503. Also sets TCP "
            "keepalives and tcp_user_timeout; 0 waits as long as it takes. Installs "
            "psycopg2's process-wide wait callback, under which psycopg2 refuses COPY on "
            "other connections of the process."),
    Setting("DB_FAIL_FAST_SECONDS", 2, _seconds,
            "After PostgreSQL did not answer within DB_RESPONSE_TIMEOUT (or the connect "
            "timeout), requests are answered 503 at once for this many seconds, then try "
            "again; 0 turns it off."),
    Setting("POOL_PRE_PING", False, _flag,
            "Ping each pooled PostgreSQL connection before use; off, a request that finds "
            "its connection dead runs once more on a new one."),
    Setting("MAX_EMBEDDED_REPLIES", 0, _non_negative_int,
            "Most replies embedded in a root comment's replies (the newest); 0 embeds all. "
            "Every reply is also listed on its own."),
    Setting("RESPONSE_CACHE_MB", 64, _non_negative_int,
            "Megabytes of rendered list responses each worker keeps, keyed by ETag; 0 turns "
            "the cache off."),
    Setting("FAST_LANE", True, _flag,
            "Standalone: anonymous JSON list requests are answered before Flask "
            "(web.fast_lane): one a worker answered and cached lately from the cache after one "
            "counter read, another page of a list Flask answered built in one statement; "
            "off sends every request through Flask."),
    Setting("LIST_TRUST_SECONDS", 5, _seconds,
            "PostgreSQL without replicas: how long a worker may answer a cached list page "
            "or a 304 without reading the list's counter row, while no change to the list "
            "has been notified (storage.list_versions); 0 reads it for every answer."),
    Setting("CACHE_MAX_AGE", 0, _non_negative_int,
            "Seconds a client or CDN may reuse a list response before revalidating it "
            "with its ETag; 0 means revalidate every time."),
    Setting("MAX_BODY_LENGTH", 5000, _positive_int,
            "Most characters in a posted comment's body."),
    Setting("MAX_REQUEST_BYTES", 65536, _positive_int,
            "Largest request body a write accepts; a larger one is answered 413."),
    Setting("POST_RATE_LIMIT", "30/minute", _rate,
            "How often one user may post, e.g. 10/minute or 100/day (moving window); "
            "empty turns the limit off."),
    Setting("RATE_LIMIT_STORAGE", "memory://", _storage_uri,
            "Where posting counts are kept: memory:// counts in each worker; "
            "redis://host:6379 shares them between workers and machines."),
    Setting("IDEMPOTENCY_RETENTION_HOURS", 24, _positive_seconds,
            "Hours a write's Idempotency-Key is remembered: a retry with the key within "
            "them gets the first answer; older keys are purged (decimals allowed)."),
    Setting("IDEMPOTENCY_PURGE_SECONDS", 300, _positive_seconds,
            "How often (seconds) each process purges a batch of expired idempotency keys, "
            "after a write's response has been sent."),
    Setting("CURRENT_USER", None, _callable,
            "A host site's function returning its signed-in user (an object with id and "
            "optionally username, avatar, is_staff) or None; a dotted name in the "
            "environment."),
    Setting("SECRET_KEY", "", _secret_key,
            "Standalone: the key that signs the browser sign-in cookie (at least 32 "
            "characters); empty generates one on first start and keeps it in "
            "instance/secret_key. Every node behind one address needs the same key.",
            secret=True),
    Setting("WEBHOOK_URLS", (), _webhook_urls,
            "Endpoints (http:// or https:// URLs, separated by commas) the deliver command "
            "POSTs every event to (docs/EVENTS.md); empty sends none. Events are recorded "
            "either way.",
            secret=True),
    Setting("WEBHOOK_SECRET", "", _webhook_secret,
            "The key that signs every webhook (HMAC-SHA256; at least 24 characters); the "
            "deliver command refuses to start without it when WEBHOOK_URLS is set.",
            secret=True),
    Setting("WEBHOOK_TIMEOUT_SECONDS", 10, _positive_seconds,
            "Seconds a webhook endpoint has to connect and to answer each POST; longer "
            "counts as a failed attempt."),
    Setting("WEBHOOK_RETRY_HOURS", 24, _positive_seconds,
            "Hours an event is retried (exponential backoff with jitter) after its first "
            "failed attempt at one endpoint; then that endpoint gives it up (the events "
            "command lists it) and goes on with the next (decimals allowed)."),
    Setting("WEBHOOK_MAX_BACKOFF_SECONDS", 600, _positive_seconds,
            "Longest wait (seconds) between two attempts at one event; the waits double "
            "from 1 s up to it."),
    Setting("WEBHOOK_LEASE_SECONDS", 30, _positive_seconds,
            "Seconds a deliverer holds an endpoint while sending to it, renewed by each "
            "delivery; a deliverer that died mid-send is taken over after it."),
    Setting("WEBHOOK_POLL_SECONDS", 0.5, _positive_seconds,
            "How often (seconds) an idle deliverer looks for new events."),
    Setting("EVENT_RETENTION_HOURS", 168, _positive_seconds,
            "Hours an event is kept at least (for a new endpoint, and for inspection); "
            "older ones are pruned once every configured endpoint has them (delivered or "
            "given up on)."),
    Setting("TARGET_EXISTS", None, _callable,
            "A host site's function (content_type, object_id) -> bool saying whether an "
            "object of one of its own content types exists, so comments can be posted to "
            "it; a dotted name in the environment."),
)

BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}


def from_environment(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Config keys for every setting found in the environment, parsed and checked."""
    environ = os.environ if environ is None else environ
    found = {s.key: environ[s.env_var] for s in SETTINGS if s.env_var in environ}
    return validate(found)


def validate(config: Mapping[str, Any]) -> dict[str, Any]:
    """Parse every known setting in ``config``; raise SettingsError naming each bad one."""
    parsed: dict[str, Any] = {}
    problems = []
    for setting in SETTINGS:
        if setting.key not in config:
            continue
        try:
            parsed[setting.key] = setting.parse(config[setting.key])
        except (TypeError, ValueError) as exc:
            shown = "(hidden)" if setting.secret else repr(config[setting.key])
            problems.append(f"{setting.env_var}={shown}: {exc}")
    if problems:
        raise SettingsError("Invalid settings: " + "; ".join(problems))
    return parsed


def resolved(config: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting's value: the checked one from ``config`` or else its default."""
    values = {s.name: s.default for s in SETTINGS}
    for key, value in validate(config).items():
        values[key[len(PREFIX):]] = value
    return values


@dataclass(frozen=True, slots=True)
class Settings:
    """One app's settings, checked and typed: a field per entry of ``SETTINGS`` (its name
    in lower case), plus the values derived from them that every request uses."""

    database_url: str
    database_replica_urls: tuple[str, ...]
    read_your_writes_seconds: float
    replica_max_lag_seconds: float
    replica_check_seconds: float
    response_cache_url: str
    page_size: int
    max_page_size: int
    time_zone: str
    default_avatar: str
    content_types: tuple[str, ...]
    trusted_proxies: int
    retry_after: int
    db_connect_timeout: int
    statement_timeout_ms: int
    idle_in_transaction_timeout_ms: int
    lock_timeout_ms: int
    db_response_timeout: float
    db_fail_fast_seconds: float
    pool_pre_ping: bool
    max_embedded_replies: int
    response_cache_mb: int
    fast_lane: bool
    list_trust_seconds: float
    cache_max_age: int
    max_body_length: int
    max_request_bytes: int
    post_rate_limit: str
    rate_limit_storage: str
    idempotency_retention_hours: float
    idempotency_purge_seconds: float
    current_user: Callable[[], Any] | None
    webhook_urls: tuple[str, ...]
    webhook_timeout_seconds: float
    webhook_retry_hours: float
    webhook_max_backoff_seconds: float
    webhook_lease_seconds: float
    webhook_poll_seconds: float
    event_retention_hours: float
    secret_key: str = field(repr=False)
    webhook_secret: str = field(default="", repr=False)
    target_exists: Callable[[str, int], bool] | None = None
    # Derived, for every request: the zone itself, the Cache-Control of lists, and what
    # else shapes a response besides the data and the URL (part of every ETag), and a
    # browsable page besides (its forms: part of its tags, never a JSON one's).
    tzinfo: ZoneInfo = field(init=False, repr=False)
    cache_control: str = field(init=False, repr=False)
    display_digest: str = field(init=False, repr=False)
    render_display: str = field(init=False, repr=False)  # rules.rendered.display_key
    page_digest: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        derived = {
            "tzinfo": ZoneInfo(self.time_zone),
            "cache_control": f"max-age={self.cache_max_age}, must-revalidate",
            "display_digest": repr((self.time_zone, self.default_avatar,
                                    self.max_embedded_replies)),
            "render_display": display_key(self.time_zone, self.default_avatar),
            "page_digest": repr(("text/html", self.content_types, self.max_body_length)),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        """Every setting from a Flask config (``COMMENTSVC_*`` keys), checked, defaults
        for the rest; SettingsError names each bad one."""
        return cls(**{name.lower(): value for name, value in resolved(config).items()})
