"""Incident dates: every accepted spelling turned into a tz-aware UTC datetime, or a clear error.

Accepted: ISO 8601 with or without a zone (a naive value means UTC), a date alone (midnight UTC),
epoch seconds or milliseconds (numbers or digit strings; a magnitude above 10^11 means
milliseconds), Jira's `30/Sep/21 17:20` and `30/Sep/2021 17:20:00` (UTC), and Jira REST's
`2021-09-30T17:20:00.000+0000`. Anything else, a missing value, or a boolean raises `IncidentDateError`:
an incident's date is never silently replaced by "now".
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from dateutil import parser as dateutil_parser

EPOCH_MILLISECONDS_THRESHOLD = 10**11
_EPOCH_PATTERN = re.compile(r"^-?\d+(\.\d+)?$")
_JIRA_FORMATS = ("%d/%b/%y %H:%M", "%d/%b/%Y %H:%M", "%d/%b/%y %H:%M:%S", "%d/%b/%Y %H:%M:%S", "%d/%b/%y", "%d/%b/%Y")
_ISO_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}")
# Dates before this are almost certainly a unit mistake (seconds read as milliseconds) or a placeholder.
EARLIEST_PLAUSIBLE = datetime(1980, 1, 1, tzinfo=UTC)
FUTURE_TOLERANCE = timedelta(days=1)


class IncidentDateError(ValueError):
    """The value cannot be read as an incident date; the message says why and what is accepted."""


def parse_incident_date(value: object, *, now: datetime | None = None) -> datetime:
    """Return `value` as a tz-aware UTC datetime.

    `now` (tz-aware) bounds the future: a date more than a day after it is refused, because an
    incident cannot have happened yet. Raises `IncidentDateError` for anything unreadable.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        raise IncidentDateError("the incident date is missing")
    if isinstance(value, bool):
        raise IncidentDateError(f"{value!r} is not a date")
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, int | float):
        parsed = _from_epoch(float(value))
    elif isinstance(value, str):
        parsed = _from_text(value.strip())
    else:
        raise IncidentDateError(f"expected a date string or epoch number, got {type(value).__name__}")
    parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    if parsed < EARLIEST_PLAUSIBLE:
        raise IncidentDateError(f"{value!r} reads as {parsed.isoformat()}, before {EARLIEST_PLAUSIBLE.year}: check the unit or format")
    reference = now or datetime.now(UTC)
    if parsed > reference + FUTURE_TOLERANCE:
        raise IncidentDateError(f"{value!r} reads as {parsed.isoformat()}, which is in the future")
    return parsed


def parse_date_text(text: str) -> datetime:
    """`text` in any accepted spelling (epoch digits included) as a tz-aware UTC datetime, without
    the plausibility bounds of an incident date; raises `IncidentDateError`."""
    if not text.strip():
        raise IncidentDateError("the date is empty")
    parsed = _from_text(text.strip())
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def read_time(value: object) -> datetime | None:
    """An ISO 8601 time as vendor APIs write it (`Z` or an offset; none means UTC) as a tz-aware
    UTC datetime, or None when `value` is not one (no error: a connector decides what that means)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _from_epoch(number: float) -> datetime:
    seconds = number / 1000 if abs(number) >= EPOCH_MILLISECONDS_THRESHOLD else number
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise IncidentDateError(f"epoch value {number!r} is out of range") from exc


def _from_text(text: str) -> datetime:
    if _EPOCH_PATTERN.fullmatch(text):
        return _from_epoch(float(text))
    if _ISO_PREFIX.match(text):
        try:
            return dateutil_parser.isoparse(text)
        except ValueError:
            pass
    for fmt in _JIRA_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise IncidentDateError(
        f"cannot read {text!r} as a date; use ISO 8601 (e.g. 2021-09-30T17:20:00Z), epoch seconds or "
        "milliseconds, or Jira's 30/Sep/21 17:20"
    )
