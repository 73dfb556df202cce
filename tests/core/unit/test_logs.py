"""Log lines as the service writes them: ISO 8601 UTC timestamps with milliseconds and `Z`, no
terminal escape codes (nor uvicorn's coloured copy of the message), and the scheduler library quiet
unless the level is DEBUG."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from service.core.logs import QUIET_LOGGERS, configure_logging

ISO_UTC_MILLIS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ESC = "\x1b"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, {name: logging.getLogger(name).level for name in QUIET_LOGGERS})
    yield
    root.handlers, root.level = saved[0], saved[1]
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


def _lines(stream: io.StringIO) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if line]


def test_json_lines_have_an_iso_utc_timestamp_and_no_escape_codes(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging("INFO", stream=stream)
    before = datetime.now(UTC)
    # What uvicorn logs at start: the plain message, and a coloured copy in `color_message`.
    logging.getLogger("uvicorn.error").info("Uvicorn running on %s", "http://127.0.0.1:8000", extra={"color_message": "Uvicorn running on \x1b[1m%s\x1b[0m"})
    logging.getLogger("goldenset.test").warning("pulled \x1b[31mops\x1b[0m", extra={"detail": "\x1b[32mgreen\x1b[0m"})
    after = datetime.now(UTC)
    lines = _lines(stream)
    assert len(lines) == 2
    assert all(ESC not in line for line in lines)
    first, second = (json.loads(line) for line in lines)
    assert "color_message" not in first and "time" not in first
    assert first["message"] == "Uvicorn running on http://127.0.0.1:8000"
    assert (second["message"], second["detail"], second["level"]) == ("pulled ops", "green", "WARNING")
    for record in (first, second):
        assert ISO_UTC_MILLIS.match(record["timestamp"]), record["timestamp"]
        stamped = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))
        assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= stamped <= after


def test_plain_lines_have_an_iso_utc_timestamp_and_no_escape_codes(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json_format=False, stream=stream)
    logging.getLogger("uvicorn.error").info("Started server process [%d]", 42, extra={"color_message": "Started server process [\x1b[36m%d\x1b[0m]"})
    (line,) = _lines(stream)
    stamp, level, name, rest = line.split(" ", 3)
    assert ISO_UTC_MILLIS.match(stamp), line
    assert (level, name, rest) == ("INFO", "uvicorn.error", "[None] Started server process [42]")


def test_a_traceback_holds_no_escape_codes(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging("INFO", stream=stream)
    try:
        raise RuntimeError("\x1b[31mboom\x1b[0m")
    except RuntimeError:
        logging.getLogger("goldenset.test").exception("failed")
    (line,) = _lines(stream)
    assert ESC not in line
    assert "RuntimeError: boom" in json.loads(line)["exc_info"]


@pytest.mark.parametrize(("level", "shown"), [("INFO", False), ("WARNING", False), ("DEBUG", True)])
def test_the_scheduler_library_is_quiet_unless_debugging(restore_logging: None, level: str, shown: bool) -> None:
    stream = io.StringIO()
    configure_logging(level, stream=stream)
    logging.getLogger("apscheduler.executors.default").info('Running job "curate" (scheduled at 2026-12-01 03:00:00+00:00)')
    logging.getLogger("apscheduler.scheduler").warning("Execution of job skipped: maximum number of running instances reached")
    names = [json.loads(line)["message"] for line in _lines(stream)]
    assert any("skipped" in message for message in names)
    assert any("Running job" in message for message in names) is shown
