"""API tokens: stored only as hashes, each with scopes."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Column
from sqlmodel import Field, SQLModel

from schemas.common import UTCDateTime, json_column_type, utcnow


class Scope(StrEnum):
    """What a token may do. `admin` implies ingest, curate and read, but never `sealed`."""

    INGEST = "ingest"
    CURATE = "curate"
    READ = "read"
    SEALED = "sealed"
    ADMIN = "admin"


def parse_scopes(text: str | list[str]) -> list[str]:
    """Parse a comma-separated scope list (or a list), refusing unknown scopes with the allowed set named."""
    raw = text.split(",") if isinstance(text, str) else text
    scopes = sorted({part.strip().lower() for part in raw if part.strip()})
    allowed = {scope.value for scope in Scope}
    unknown = [scope for scope in scopes if scope not in allowed]
    if unknown:
        raise ValueError(f"unknown scope(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    if not scopes:
        raise ValueError(f"a token needs at least one scope; allowed: {', '.join(sorted(allowed))}")
    return scopes


def effective_scopes(scopes: list[str]) -> set[str]:
    """The scopes a token really has, with `admin` expanded."""
    result = set(scopes)
    if Scope.ADMIN.value in result:
        result |= {Scope.INGEST.value, Scope.CURATE.value, Scope.READ.value}
    return result


class ApiToken(SQLModel, table=True):
    """A bearer token. Only `token_hash` (sha256 of the token) is kept; `prefix` identifies it in lists.
    A token with `expires_at` is refused from that instant on; without it, it never expires."""

    __tablename__ = "api_token"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=128)
    token_hash: str = Field(max_length=64, sa_column_kwargs={"unique": True}, index=True)
    prefix: str = Field(max_length=16)
    scopes: list[str] = Field(default_factory=list, sa_column=Column(json_column_type(), nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    last_used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def expired(self, now: datetime) -> bool:
        """Whether the token's expiry has come at `now` (tz-aware); never for a token without one."""
        return self.expires_at is not None and self.expires_at <= now


class UiSession(SQLModel, table=True):
    """A web UI session opened by signing in with an API token: the browser holds its id and a
    secret (only the secret's sha256 is kept) in a signed cookie, and the token's scopes apply.
    It ends at sign-out, at `expires_at`, or when the token is revoked or expires. `csrf` is the
    value every form of the session must send back."""

    __tablename__ = "ui_session"

    id: int | None = Field(default=None, primary_key=True)
    token_id: int = Field(foreign_key="api_token.id", index=True)
    secret_hash: str = Field(max_length=64)
    csrf: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
