"""The connector interface: a typed configuration, and pages of records each carrying the cursor
to store once that page is committed.

A connector never touches the database and never reads the clock or sleeps by itself: the HTTP
client, the clock and the sleep function are passed in (`ConnectorContext`), so tests replay
vendors over real sockets without waiting.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, ClassVar, Generic, TypeVar

import httpx
from pydantic import AfterValidator, BaseModel, ConfigDict, SecretStr, ValidationError

from ingest.readers import RawRecord
from schemas.validation import describe_errors


class ConnectorError(Exception):
    """A pull failed; the message says what happened and what to do."""


class AuthError(ConnectorError):
    """The vendor refused the credentials (401/403). The source stops until they are replaced."""


class MalformedPage(ConnectorError):
    """A page did not have the vendor's documented shape; its cursor is not stored."""


def unreadable_cursor(text: str) -> MalformedPage:
    """The error for a stored cursor a connector cannot read, saying how to start over."""
    return MalformedPage(
        f"the stored cursor {text[:80]!r} cannot be read; reset it with `goldenset source configure {{name}} --reset-cursor` "
        "(API: PATCH /v1/sources/{name} reset_cursor=true)"
    )


class TransientError(ConnectorError):
    """Retries were exhausted on timeouts, resets, 5xx or 429; the next pull starts where this one stopped.

    `wait_seconds`: how long the vendor asked to wait before the next request, where its last
    answer said (None: it named no wait, or never answered)."""

    def __init__(self, message: str, *, wait_seconds: float | None = None) -> None:
        super().__init__(message)
        self.wait_seconds = wait_seconds


class ConfigError(ValueError):
    """A connector configuration is invalid; the message names each bad field."""


def _base_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return value.rstrip("/")


BaseUrl = Annotated[str, AfterValidator(_base_url)]
"""A vendor's API root: http(s) only, without a trailing slash."""


class ConnectorConfig(BaseModel):
    """Base of every connector's configuration. Credentials are `SecretStr`: never logged or shown."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def masked(self) -> dict[str, Any]:
        """The configuration as JSON with every secret replaced by `***` (safe to show and log)."""
        return self._dump(reveal=False)

    def revealed(self) -> dict[str, Any]:
        """The configuration as JSON with secrets in plain text, for encrypted storage only."""
        return self._dump(reveal=True)

    def _dump(self, *, reveal: bool) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                data[name] = value.get_secret_value() if reveal else "***"
        return data


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to retry timeouts, resets, 5xx and 429 (exponential backoff with jitter; a
    `Retry-After` or rate-limit reset is honoured up to `max_wait_seconds`)."""

    max_attempts: int = 6
    initial_wait_seconds: float = 1.0
    max_backoff_seconds: float = 60.0
    jitter_seconds: float = 1.0
    max_wait_seconds: float = 3600.0


@dataclass(frozen=True)
class ConnectorContext:
    """What a connector may use from the outside world."""

    client: httpx.Client
    clock: Callable[[], datetime]
    sleep: Callable[[float], None]
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True)
class Page:
    """One committed unit of a pull: its records, and the cursor to store once they are stored.

    `total` is the number of records the whole pull is expected to read, where the vendor says.
    """

    records: list[RawRecord]
    cursor: str
    total: int | None = None


ConfigT = TypeVar("ConfigT", bound=ConnectorConfig)


class Connector(ABC, Generic[ConfigT]):
    """Pulls one incident system. Subclasses set `kind`, `config_model` and `default_mapping`."""

    kind: ClassVar[str]
    config_model: ClassVar[type[ConnectorConfig]]
    default_mapping: ClassVar[dict[str, Any]]

    def __init__(self, config: ConfigT, context: ConnectorContext) -> None:
        self.config = config
        self.context = context

    @classmethod
    def parse_config(cls, document: dict[str, Any]) -> ConnectorConfig:
        """Validate a configuration document, raising `ConfigError` that names each bad field
        (never echoing a credential's value)."""
        try:
            return cls.config_model.model_validate(document)
        except ValidationError as exc:
            problems = "; ".join(describe_errors(exc, cls.config_model))
            raise ConfigError(f"invalid {cls.kind} connector configuration: {problems}") from exc

    @abstractmethod
    def pages(self, cursor: str | None) -> Iterator[Page]:
        """Pages of records updated since `cursor` (None: from the beginning), oldest first.

        Each page's `cursor` must be safe to resume from once that page is committed: resuming
        never skips a record, and may repeat some (the store's upsert absorbs repeats). Raises
        `AuthError`, `MalformedPage` or `TransientError`.
        """
