"""Sources: where items come from (a file feed, a push endpoint, a webhook, later a pull connector)."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, StrictBool, field_validator
from sqlalchemy import Column, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow

SOURCE_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class SourceKind(StrEnum):
    """How a source delivers records. Pull kinds are connectors (see ingest.connectors); third-party
    connectors add kinds of their own."""

    FILE = "file"
    PUSH = "push"
    JIRA = "jira"
    GITHUB = "github"
    PAGERDUTY = "pagerduty"
    SERVICENOW = "servicenow"
    OPSGENIE = "opsgenie"
    SENTRY = "sentry"
    INCIDENTIO = "incidentio"
    REFERENCE = "reference"


class SourceStatus(StrEnum):
    """State of a source's pulls. `auth_failed` stops scheduled pulls until the credentials change."""

    IDLE = "idle"
    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    AUTH_FAILED = "auth_failed"


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
    encrypted (see service.core.crypto) and never returned after creation."""

    id: int | None = Field(default=None, primary_key=True)
    mapping: dict[str, Any] | None = Field(default=None, sa_column=Column(json_column_type(), nullable=True))
    config: dict[str, Any] = Field(default_factory=dict, sa_column=Column(json_column_type(), nullable=False))
    cursor: str | None = Field(default=None, sa_type=Text)
    webhook_secret: str | None = Field(default=None)
    connector_secret: str | None = Field(default=None, sa_type=Text)
    pull_interval_seconds: int | None = Field(default=None)
    enabled: bool = Field(default=True)
    status: str = Field(default=SourceStatus.IDLE.value, sa_type=String(16))
    last_run_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_success_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_error: str | None = Field(default=None, sa_type=Text)
    items_pulled: int = Field(default=0)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class WebhookDelivery(SQLModel, table=True):
    """A webhook delivery accepted for a source, kept while its signature is fresh so that a replay
    of it (same timestamp and body, under any of the source's secrets) is refused.

    `digest` is sha256 of the signed message `"<timestamp>." + body`; `signed_at` is the signature's
    timestamp, and a row is pruned once that timestamp is older than the tolerance."""

    __tablename__ = "webhook_delivery"
    __table_args__ = (UniqueConstraint("source_id", "digest", name="uq_webhook_delivery_source_digest"),)

    id: int | None = Field(default=None, primary_key=True)
    source_id: int = Field(foreign_key="source.id")
    digest: str = Field(max_length=64)
    signed_at: datetime = Field(sa_type=UTCDateTime, index=True)
    received_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


MIN_PULL_INTERVAL_SECONDS = 60


def _check_interval(value: int | None) -> int | None:
    if value is not None and value < MIN_PULL_INTERVAL_SECONDS:
        raise ValueError(f"pull_interval_seconds must be at least {MIN_PULL_INTERVAL_SECONDS}, or null for manual pulls only")
    return value


INTERVAL_FIELD = Field(
    default=None,
    schema_extra={"json_schema_extra": {"minimum": MIN_PULL_INTERVAL_SECONDS}},
    description=f"Seconds between scheduled pulls, at least {MIN_PULL_INTERVAL_SECONDS}; null: manual pulls only.",
)


class SourceCreate(SourceBase):
    """Body of `POST /v1/sources`. A missing mapping means records arrive in goldenset's native item
    shape (or, for a pull connector, the connector's default mapping). `connector` is the pull
    connector's configuration, credentials included; it is validated, stored encrypted and never
    returned."""

    # The pattern is stated in the document; the validator enforces it with a message in words.
    name: str = Field(max_length=64, schema_extra={"json_schema_extra": {"pattern": SOURCE_NAME_PATTERN.pattern}})
    mapping: dict[str, Any] | None = None
    connector: dict[str, Any] | None = None
    pull_interval_seconds: int | None = INTERVAL_FIELD

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_source_name(value)

    @field_validator("pull_interval_seconds")
    @classmethod
    def _valid_interval(cls, value: int | None) -> int | None:
        return _check_interval(value)


class SourceUpdate(SQLModel):
    """Body of `PATCH /v1/sources/{name}`: only the fields present change. A new `connector`
    replaces the stored configuration whole; `connector_settings` changes only the keys it names
    (on top of `connector` when both are given). Either clears an `auth_failed` state."""

    mapping: dict[str, Any] | None = None
    connector: dict[str, Any] | None = None
    connector_settings: dict[str, Any] | None = Field(
        default=None,
        description="Keys of the connector configuration to change: each value replaces the stored one, a null puts the key back to its default, "
        "and every key not named (credentials included) is kept. The configuration that results is validated whole.",
    )
    pull_interval_seconds: int | None = INTERVAL_FIELD
    enabled: StrictBool | None = None
    reset_cursor: StrictBool = False

    @field_validator("pull_interval_seconds")
    @classmethod
    def _valid_interval(cls, value: int | None) -> int | None:
        return _check_interval(value)


class SourceRead(SourceBase):
    """A source as the API shows it. `config` is the connector configuration with credentials masked."""

    id: int
    mapping: dict[str, Any] | None
    config: dict[str, Any]
    cursor: str | None
    pull_interval_seconds: int | None
    enabled: bool
    status: str
    last_run_at: datetime | None
    last_success_at: datetime | None
    last_error: str | None
    items_pulled: int
    created_at: datetime
    updated_at: datetime
    item_count: int = 0


class SourceCreated(SourceRead):
    """Returned once, at creation: the only time the webhook secret is shown."""

    webhook_secret: str


class ConnectionOutcome(StrEnum):
    """How a connection test of a connector source ended: `ok`, or what stopped it. `bad_credentials`:
    the vendor refused them (401, 403); `not_found`: the address (404, 410); `unreachable`: no
    connection to the host; `timed_out`: no answer in the test's time; `rate_limited`: the vendor
    asks to wait; `vendor_error`: a 5xx; `refused`: another 4xx; `unexpected_answer`: an answer that
    is not the vendor's documented shape; `bad_settings`: the stored settings (or cursor) cannot be
    used, found before anything was sent."""

    OK = "ok"
    BAD_CREDENTIALS = "bad_credentials"
    NOT_FOUND = "not_found"
    UNREACHABLE = "unreachable"
    TIMED_OUT = "timed_out"
    RATE_LIMITED = "rate_limited"
    VENDOR_ERROR = "vendor_error"
    REFUSED = "refused"
    UNEXPECTED_ANSWER = "unexpected_answer"
    BAD_SETTINGS = "bad_settings"


class ConnectionTestResult(BaseModel):
    """The answer of `POST /v1/sources/{name}/test`: one page read from the vendor with the stored
    settings and credentials, nothing stored. `http_status` is the vendor's last answer (None: it
    never answered); `records` the records on that page (None: no page was read); `from_cursor`
    whether the page is the one the next pull starts with (the stored cursor) rather than the
    first from the beginning. `detail` says what happened, `action` what to change (None when ok);
    `retry_after_seconds` is the wait the vendor asked for, which a test never waits."""

    source: str
    kind: str
    ok: bool
    outcome: ConnectionOutcome
    http_status: int | None
    records: int | None
    from_cursor: bool
    requests: int
    elapsed_seconds: float
    retry_after_seconds: float | None
    detail: str
    action: str | None
