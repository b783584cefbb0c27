"""gunicorn settings of a checkout (read by gunicorn from the working directory: `make
run`, `make serve` and the tests' and benchmarks' servers): the package's own, which an
installed service gets from `commentsvc serve` (commentsvc/operations/gunicorn_settings.py
says what each decides).
"""

from commentsvc.operations.gunicorn_settings import (  # noqa: F401
    control_socket_disable,
    forwarded_allow_ips,
    graceful_timeout,
    keepalive,
    limit_request_line,
    logger_class,
    post_fork,
    threads,
    timeout,
    worker_class,
)
