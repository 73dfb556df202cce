"""Sources: where items come from (a file feed, a push endpoint, a webhook, later a pull connector)."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import field_validator
from sqlalchemy import Column, String
from sqlmodel import Field, SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow

SOURCE_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class SourceKind(StrEnum):
    """How a source delivers records."""

    FILE = "file"
    PUSH = "push"
    JIRA = "jira"
    GITHUB = "github"
    PAGERDUTY = "pagerduty"


def check_source_name(name: str) -> str:
    """Return `name` if it is a valid source name, else raise ValueError saying what is allowed."""
    if not SOURCE_NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"invalid source name {name!r}: use 1-64 characters, lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


class SourceBase(SQLModel):
    name: str = Field(max_length=64, sa_column_kwargs={"unique": True}, index=True)
    kind: str = Field(default=SourceKind.PUSH.value, sa_type=String(32))


class Source(SourceBase, table=True):
    """A named origin of items. `mapping` turns its raw records into items; `webhook_secret` is stored
    encrypted (see service.crypto) and never returned after creation."""

    id: int | None = Field(default=None, primary_key=True)
    mapping: dict[str, Any] | None = Field(default=None, sa_column=Column(json_column_type(), nullable=True))
    config: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))
    cursor: str | None = Field(default=None)
    webhook_secret: str | None = Field(default=None)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class SourceCreate(SourceBase):
    """Body of `POST /v1/sources`. A missing mapping means records arrive in goldenset's native item shape."""

    mapping: dict[str, Any] | None = None
    config: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_source_name(value)

    @field_validator("kind")
    @classmethod
    def _valid_kind(cls, value: str) -> str:
        allowed = [kind.value for kind in SourceKind]
        if value not in allowed:
            raise ValueError(f"unknown source kind {value!r}; expected one of {', '.join(allowed)}")
        return value


class SourceRead(SourceBase):
    id: int
    mapping: dict[str, Any] | None
    config: dict[str, Any]
    cursor: str | None
    created_at: datetime
    updated_at: datetime
    item_count: int = 0


class SourceCreated(SourceRead):
    """Returned once, at creation: the only time the webhook secret is shown."""

    webhook_secret: str
