"""Column types and helpers shared by every table: tz-aware UTC timestamps, portable JSON, the
checked types every API input uses for ids and dates, and turning a row into the API model that
shows it."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, WithJsonSchema
from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import SQLModel

ReadT = TypeVar("ReadT", bound=BaseModel)

MAX_ROW_ID = 2**31 - 1
"""The largest row id every backend stores (PostgreSQL's INTEGER); a larger id names no row."""
MAX_COUNT = 2**31 - 1
"""The largest count or size an input may give (it is stored in an INTEGER column)."""
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
YEAR_PATTERN = r"^(19[0-9]{2}|[2-8][0-9]{3})-"
"""The years an input date may have, as the OpenAPI document states them (a date-time format has
no bounds of its own): 1900 to 8999, as written."""
NOT_BLANK = r"\S"
"""A text with at least one character that is not white space, as a pattern the OpenAPI document
states (the service checks it after stripping the text, with a message saying what to write)."""
_NUMBER = re.compile(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*")


def _not_a_number(value: Any) -> Any:
    """Dates are given as ISO 8601 text: a number (or a numeric string) is refused rather than read
    as seconds since 1970, which nobody means in an eval's settings."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("must be an ISO 8601 date or date-time such as 2024-01-01T00:00:00Z, not a number")
    return value


def _instant(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("needs a time zone, e.g. 2024-01-01T00:00:00Z")
    # The date as written, not in UTC: the bound the document states is a pattern on the text, and
    # an hour's offset either side of a bound is still far inside what every backend stores.
    if not EARLIEST.date() <= value.date() < LATEST.date():
        raise ValueError(f"must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return value


def _day(value: date) -> date:
    if not EARLIEST.date() <= value < LATEST.date():
        raise ValueError(f"must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return value


RowId = Annotated[int, Field(ge=1, le=MAX_ROW_ID)]
"""An id of a stored row, as an input."""
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
"""A count or size as an input: zero or more, within what the database stores."""
Instant = Annotated[
    datetime,
    BeforeValidator(_not_a_number),
    AfterValidator(_instant),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": YEAR_PATTERN}),
]
"""A date-time as an input: ISO 8601 with a time zone, between 1900 and 9000."""
Day = Annotated[date, BeforeValidator(_not_a_number), AfterValidator(_day), WithJsonSchema({"type": "string", "format": "date", "pattern": YEAR_PATTERN})]
"""A calendar date as an input: ISO 8601 (YYYY-MM-DD), between 1900 and 9000."""


def utcnow() -> datetime:
    """The current time as a tz-aware UTC datetime."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always tz-aware UTC in Python, on every backend.

    Naive datetimes are refused on the way in (a naive value is a bug in the caller: the
    ingest layer decides what a naive incident date means). SQLite keeps no zone, so values
    read back are marked UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} given where a tz-aware one is required")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def json_column_type() -> Any:
    """JSON on SQLite, JSONB on PostgreSQL."""
    return JSON().with_variant(JSONB(), "postgresql")


def read_model(shape: type[ReadT], row: SQLModel, **fields: Any) -> ReadT:
    """`row` as the API model `shape`: the row's fields by name, then `fields` (names looked up in
    other tables, values computed for the reader) added or replacing them. Row fields the API
    model does not declare are left out; a field it declares and nobody gives fails validation."""
    return shape.model_validate({**row.model_dump(), **fields})
