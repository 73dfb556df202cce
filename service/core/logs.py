"""JSON logs with the request id of the request being served; tokens, secrets and stored content
(the values in database errors) never reach a log.

Every line, JSON or plain, is stamped in ISO 8601 UTC to the millisecond (`2026-12-01T03:00:00.123Z`)
and holds no terminal escape codes (uvicorn's coloured `color_message` is dropped). The scheduler
library logs at WARNING and above unless the level is DEBUG: at INFO it logs every job it runs."""

from __future__ import annotations

import logging
import re
import sys
import traceback
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

import psycopg
from pythonjsonlogger.json import JsonFormatter
from sqlalchemy.exc import StatementError

request_id_var: ContextVar[str | None] = ContextVar("goldenset_request_id", default=None)
# CSI sequences (colours, cursor moves) and the other two-character escapes of ECMA-48.
_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")
# Extras that repeat the message with terminal colours (uvicorn's).
_DROPPED_FIELDS = ("color_message",)
QUIET_LOGGERS = ("apscheduler",)
"""Libraries that log at WARNING and above unless the level is DEBUG."""

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


# PostgreSQL classes whose primary message may quote a value: data exceptions and PL/pgSQL's RAISE.
_VALUE_QUOTING_SQLSTATE_CLASSES = ("22", "P0")
# PostgreSQL's DETAIL and CONTEXT inside a quoted error, up to SQLAlchemy's "[SQL: ...]" or the end.
_QUOTED_DRIVER_DETAIL = re.compile(r"\n(?:DETAIL|CONTEXT):.*?(?=\n\[SQL: |\Z)", re.DOTALL)
_CAUSE_LINK = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT_LINK = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _driver_error_text(error: BaseException) -> str:
    # PostgreSQL puts rows and keys in DETAIL ("Failing row contains (...)"), statements and
    # parameters in CONTEXT, and the offending value in a data exception's message; keep only
    # the code and the names of what failed. SQLite's messages name constraints, never values.
    if not isinstance(error, psycopg.Error) or error.sqlstate is None:
        return str(error)
    diag = error.diag
    quotes_values = error.sqlstate.startswith(_VALUE_QUOTING_SQLSTATE_CLASSES)
    names = "".join(f"; {kind} {name}" for kind, name in (("constraint", diag.constraint_name), ("table", diag.table_name), ("column", diag.column_name)) if name)
    if quotes_values or not diag.message_primary:
        return f"[SQLSTATE {error.sqlstate}{names}; message withheld from logs: it may quote a value]"
    return f"{diag.message_primary} [SQLSTATE {error.sqlstate}{names}; detail withheld from logs]"


def _exception_text(error: BaseException) -> str:
    if isinstance(error, StatementError):
        # SQLAlchemy's own text repeats the driver's message (and, on engines not made by
        # service.core.db, the parameters); rebuild it from the statement and a safe message.
        orig = error.orig
        message = f"({type(orig).__module__}.{type(orig).__qualname__}) {_driver_error_text(orig)}" if orig is not None else str(error.args[0] if error.args else "")
        lines = [f"({detail})" for detail in error.detail] + [message] + ([f"[SQL: {error.statement}]"] if error.statement else [])
        return "\n".join(lines)
    if isinstance(error, psycopg.Error):
        return _driver_error_text(error)
    try:
        text = str(error)
    except Exception:
        return "<exception str() failed>"
    # Some messages quote a database error whole (SQLAlchemy's PendingRollbackError does).
    return _QUOTED_DRIVER_DETAIL.sub("", text)


def format_exception_safely(error: BaseException) -> str:
    """The traceback of `error` with its causes, laid out as `traceback.format_exception` does,
    except that a database error shows its SQL and what failed (code, constraint, table, column)
    but never a value: no bound parameters, DETAIL or CONTEXT, nor a data error's quoted value."""
    # The chain from `error` back to its first cause; each cause carries the line that links it to what it caused.
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE_LINK
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT_LINK
        else:
            current = None
    parts: list[str] = []
    for exception, link_to_next in reversed(chain):
        if exception.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n" + "".join(traceback.format_tb(exception.__traceback__)))
        kind = type(exception)
        name = kind.__qualname__ if kind.__module__ in ("builtins", "__main__") else f"{kind.__module__}.{kind.__qualname__}"
        text = _exception_text(exception)
        parts.append(f"{name}: {text}\n" if text else f"{name}\n")
        parts.append(link_to_next)
    return "".join(parts).rstrip("\n")


def strip_ansi(text: str) -> str:
    """`text` without terminal escape sequences."""
    return _ANSI_ESCAPE.sub("", text)


def iso_utc(created: float) -> str:
    """A log record's time (`LogRecord.created`) as ISO 8601 UTC to the millisecond, with `Z`."""
    moment = datetime.fromtimestamp(created, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        # Mask the message as it will be printed, arguments substituted, so nothing slips through.
        record.msg = strip_ansi(mask_secrets(record.getMessage()))
        record.args = None
        for name in _DROPPED_FIELDS:
            record.__dict__.pop(name, None)
        if record.exc_info and record.exc_info[1] is not None:
            # Both formatters print `exc_text` when `exc_info` is gone; rendering it here keeps
            # database values and secrets out of every traceback, whatever logged it.
            record.exc_text = strip_ansi(mask_secrets(format_exception_safely(record.exc_info[1])))
            record.exc_info = None
        return True


class PlainFormatter(logging.Formatter):
    """`<ISO UTC time> <level> <logger> [<request id>] <message>`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return iso_utc(record.created)


class JsonLineFormatter(JsonFormatter):
    """One JSON object a line: `timestamp` (ISO 8601 UTC, milliseconds, `Z`), `level`, `name`,
    `message`, `request_id`, and the record's extras; string values hold no escape codes."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s", rename_fields={"levelname": "level", "asctime": "timestamp"})

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return iso_utc(record.created)

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        for name in _DROPPED_FIELDS:
            log_data.pop(name, None)
        return {key: strip_ansi(value) if isinstance(value, str) else value for key, value in log_data.items()}


def configure_logging(level: str = "INFO", *, json_format: bool = True, stream: TextIO | None = None) -> None:
    """Send goldenset's and uvicorn's logs to `stream` (default stderr), as JSON lines unless `json_format` is False."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLineFormatter() if json_format else PlainFormatter())
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
    quiet_level = logging.DEBUG if root.level <= logging.DEBUG else max(logging.WARNING, root.level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(quiet_level)
