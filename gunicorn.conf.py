"""gunicorn settings that decide what a restart, a stuck request or a hung database costs
(read by gunicorn from the working directory; `make run` and the reliability scripts serve
with it).

Threaded workers (``gthread``): a request waiting on the database holds one thread, not
the whole worker, so /healthz and requests that need no database are answered while
others wait. A hung database costs a waiting request at most
COMMENTSVC_DB_RESPONSE_TIMEOUT (4 s by default), after which requests fail fast for a
moment (COMMENTSVC_DB_FAIL_FAST_SECONDS); see RELIABILITY.md, "Hung and flaky databases".
A running statement is cancelled by the server after COMMENTSVC_STATEMENT_TIMEOUT_MS
(10 s by default) and answered 503, well inside ``timeout``, so a slow database never gets
a worker killed mid-request. On HUP or TERM a worker finishes the requests it holds before
it exits; ``graceful_timeout`` is how long they may take.
"""

worker_class = "gthread"
threads = 8
timeout = 30
graceful_timeout = 30
keepalive = 2  # longer than `commentsvc serve`'s nginx keeps an idle connection (1 s)

# Forwarded headers count only when COMMENTSVC_TRUSTED_PROXIES says so (the app decides);
# gunicorn's own default would trust X-Forwarded-Proto from any loopback client.
forwarded_allow_ips = ""

# A worker dies with its master (prctl PDEATHSIG), so a master killed with SIGKILL leaves
# no worker holding the port and a supervisor's restart can bind it at once.
from commentsvc.operations.parent_death import post_fork  # noqa: E402, F401

# gunicorn's own lines (booting, a worker timeout, a crash's traceback) as JSON lines,
# like the service's.
logger_class = "commentsvc.operations.gunicorn_logging.JsonLogger"
