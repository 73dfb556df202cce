"""Column types and helpers shared by every table: tz-aware UTC timestamps, portable JSON, and
turning a row into the API model that shows it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import SQLModel

ReadT = TypeVar("ReadT", bound=BaseModel)


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
