"""gunicorn's own log lines (booting, worker timeouts, a worker's crash with its
traceback) as JSON, like the service's: ``logger_class`` in gunicorn.conf.py.

gunicorn's error log is otherwise plain text on the same stderr as the service's JSON
lines; a log shipper would have to parse two formats. The access log is left as it is
(off unless ``accesslog`` is set; the service writes its own request lines).
"""

from __future__ import annotations

from gunicorn import glogging
from gunicorn.config import Config

from commentsvc.operations.request_log import JsonFormatter


class JsonLogger(glogging.Logger):
    """gunicorn's logger with its error log's handlers formatting JSON lines."""

    def setup(self, cfg: Config) -> None:
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(JsonFormatter())
