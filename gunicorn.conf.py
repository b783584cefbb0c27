"""gunicorn settings that decide what a restart or a stuck request costs (read by gunicorn
from the working directory; `make run` and the reliability scripts serve with it).

A request's statements are cancelled after COMMENTSVC_STATEMENT_TIMEOUT_MS (10 s by
default) and answered 503, well inside ``timeout``, so a slow database never gets a worker
killed mid-request. On HUP or TERM a sync worker finishes the request it holds before it
exits; ``graceful_timeout`` is how long it may take.
"""

worker_class = "sync"
timeout = 30
graceful_timeout = 30
keepalive = 2

# Forwarded headers count only when COMMENTSVC_TRUSTED_PROXIES says so (the app decides);
# gunicorn's own default would trust X-Forwarded-Proto from any loopback client.
forwarded_allow_ips = ""

# A worker dies with its master (prctl PDEATHSIG), so a master killed with SIGKILL leaves
# no worker holding the port and a supervisor's restart can bind it at once.
from commentsvc.parent_death import post_fork  # noqa: E402, F401
