"""gunicorn settings that decide what a restart, a stuck request or a hung database costs.

Part of the package, so an installed service gets them too: `commentsvc serve` passes them
to its gunicorns (``-c python:commentsvc.operations.gunicorn_settings``) unless the working
directory has a gunicorn.conf.py of its own, and a checkout's gunicorn.conf.py (read by
gunicorn from the working directory: `make run`, the tests' and benchmarks' servers) is
these.

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

# A worker dies with its master (prctl PDEATHSIG), so a master killed with SIGKILL leaves
# no worker holding the port and a supervisor's restart can bind it at once.
from commentsvc.operations.parent_death import post_fork  # noqa: F401

# The module gunicorn reads these from, as its -c option names it.
MODULE = "python:commentsvc.operations.gunicorn_settings"

# gthread, answering what gunicorn refuses itself as JSON (operations.gunicorn_worker).
worker_class = "commentsvc.operations.gunicorn_worker.ThreadWorker"
threads = 8
# The longest request line gunicorn takes: its own maximum, as long as nginx takes in front
# of it (8 KB), so a URL nginx passes is served (a 5,000-digit page_size too).
limit_request_line = 8190
timeout = 30
graceful_timeout = 30
keepalive = 2  # longer than `commentsvc serve`'s nginx keeps an idle connection (1 s)

# Forwarded headers count only when COMMENTSVC_TRUSTED_PROXIES says so (the app decides);
# gunicorn's own default would trust X-Forwarded-Proto from any loopback client.
forwarded_allow_ips = ""

# No control socket: the service does not use one, and gunicorn's default is one path per
# user, which a second gunicorn of that user (another `make run`) takes over and removes
# when it stops.
control_socket_disable = True

# gunicorn's own lines (booting, a worker timeout, a crash's traceback) as JSON lines,
# like the service's.
logger_class = "commentsvc.operations.gunicorn_logging.JsonLogger"
