"""JSON logs with the request id of the request being served; tokens and secrets never reach a log."""

from __future__ import annotations

import logging
import re
import sys
from contextvars import ContextVar
from typing import TextIO

from pythonjsonlogger.json import JsonFormatter

request_id_var: ContextVar[str | None] = ContextVar("goldenset_request_id", default=None)

# Anything shaped like one of our tokens or secrets, or an Authorization value, is masked.
_SECRET_PATTERNS = [
    re.compile(r"\b(gs|whsec)_[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(bearer|basic|token)\s+[^\s\"',]+"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"),
]


def mask_secrets(text: str) -> str:
    """`text` with token- and secret-shaped substrings replaced by `***`."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda match: (match.group(1) if match.lastindex and match.re.groups == 2 else "") + "***", text)
    return text


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        # Mask the message as it will be printed, arguments substituted, so nothing slips through.
        record.msg = mask_secrets(record.getMessage())
        record.args = None
        return True


def configure_logging(level: str = "INFO", *, json_format: bool = True, stream: TextIO | None = None) -> None:
    """Send goldenset's and uvicorn's logs to `stream` (default stderr), as JSON lines unless `json_format` is False."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if json_format:
        handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s", rename_fields={"levelname": "level", "asctime": "time"}))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"))
    handler.addFilter(_ContextFilter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers = []
        logger.propagate = True
    # Our own access log carries the request id and the route; uvicorn's would duplicate it.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
