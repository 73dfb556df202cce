"""A record's version: the source's own updated time or version number of a record, which orders
the events about one record so that an older event never overwrites a newer one.

A version reads as a number (an integer or decimal, or a string holding one; compared exactly)
or as a date (any spelling `ingest.dates` reads, with or without a zone, compared as UTC
instants). Epoch values are numbers. It is stored as canonical text that reads back as the same
kind. Versions of one kind are ordered; a number and a date are not (the source's mapping
changed), so a record whose version is of another kind than the stored one is applied as if
neither had a version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

from ingest.dates import IncidentDateError, parse_date_text

MAX_VERSION_LENGTH = 64
"""The longest version text read or stored (a date, a counter or a timestamp all fit)."""
_MAX_EXPONENT = 40
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


class VersionError(ValueError):
    """The value cannot be read as a version; the message says why."""


@dataclass(frozen=True)
class Version:
    """A version read from its text: a number or a date."""

    number: Decimal | None = None
    date: datetime | None = None

    def older_than(self, other: Version) -> bool:
        """Whether this version is strictly older than `other`; False when their kinds differ."""
        if self.number is not None and other.number is not None:
            return self.number < other.number
        if self.date is not None and other.date is not None:
            return self.date < other.date
        return False


def _number_text(number: Decimal) -> str:
    if not number.is_finite() or abs(number.adjusted()) > _MAX_EXPONENT:
        raise VersionError(f"{number} is not a finite number of at most {_MAX_EXPONENT} digits")
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0", "+0") else text


def canonical_version(value: object) -> str | None:
    """The canonical text of `value` as a version, or None when it is missing (None or blank).

    Raises `VersionError` for a boolean, a non-finite number, text that is neither a number nor
    a date, or text longer than `MAX_VERSION_LENGTH`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise VersionError(f"a version must be a number or a date, got {type(value).__name__}")
    if isinstance(value, int):
        if abs(value) >= 10**_MAX_EXPONENT:
            raise VersionError(f"a version number has at most {_MAX_EXPONENT} digits")
        return str(value)
    if isinstance(value, float):
        return _number_text(Decimal(repr(value)) if value == value else Decimal("NaN"))
    text = value.strip()
    if len(text) > MAX_VERSION_LENGTH:
        raise VersionError(f"a version is at most {MAX_VERSION_LENGTH} characters long")
    if _NUMBER.fullmatch(text):
        try:
            return _number_text(Decimal(text))
        except InvalidOperation as exc:  # pragma: no cover - the pattern only lets numbers through
            raise VersionError(f"{text!r} is not a number") from exc
    try:
        return parse_date_text(text).isoformat()
    except (IncidentDateError, OverflowError) as exc:
        raise VersionError(f"{text!r} is neither a number nor a date (ISO 8601 such as 2024-06-01T12:00:00Z, or Jira's 30/Sep/21 17:20)") from exc


def read_version(text: str) -> Version | None:
    """A stored canonical version text read back; None when it cannot be read."""
    if _NUMBER.fullmatch(text):
        return Version(number=Decimal(text))
    try:
        return Version(date=parse_date_text(text))
    except (IncidentDateError, OverflowError):
        return None


def is_older(candidate: str | None, stored: str | None) -> bool:
    """Whether a record of version `candidate` is older than the item's `stored` version, so it must
    not be applied. False when either is missing, cannot be read, or their kinds differ."""
    if not candidate or not stored:
        return False
    new, old = read_version(candidate), read_version(stored)
    return new is not None and old is not None and new.older_than(old)
