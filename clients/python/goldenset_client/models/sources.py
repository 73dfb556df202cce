"""Sources: where items come from (`/v1/sources`)."""

from datetime import datetime
from typing import Any, Literal

from goldenset_client.models._base import _Request, _Response


class SourceCreate(_Request):
    """Body of `POST /v1/sources`. A missing mapping means records arrive in goldenset's native item
    shape (or, for a pull connector, the connector's default mapping). `connector` is the pull
    connector's configuration, credentials included; it is validated, stored encrypted and never
    returned."""

    name: str
    kind: str = "push"
    mapping: dict[str, Any] | None = None
    connector: dict[str, Any] | None = None
    pull_interval_seconds: int | None = None


class SourceCreated(_Response):
    """Returned once, at creation: the only time the webhook secret is shown."""

    name: str
    kind: str = "push"
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
    webhook_secret: str


class SourceRead(_Response):
    """A source as the API shows it. `config` is the connector configuration with credentials masked."""

    name: str
    kind: str = "push"
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


class SourceUpdate(_Request):
    """Body of `PATCH /v1/sources/{name}`: only the fields present change. A new `connector` replaces
    the stored configuration whole; `connector_settings` changes only the keys it names (a null puts
    one back to its default; credentials not named are kept). Either clears an `auth_failed` state."""

    mapping: dict[str, Any] | None = None
    connector: dict[str, Any] | None = None
    connector_settings: dict[str, Any] | None = None
    pull_interval_seconds: int | None = None
    enabled: bool | None = None
    reset_cursor: bool = False


ConnectionOutcome = Literal[
    "ok", "bad_credentials", "not_found", "unreachable", "timed_out", "rate_limited", "vendor_error", "refused", "unexpected_answer", "bad_settings"
]
"""How a connection test ended: `ok`, or what stopped it (the credentials, the address, the host,
time, a rate limit, the vendor, its answer, or the stored settings)."""


class ConnectionTestResult(_Response):
    """`POST /v1/sources/{name}/test`: one page read from the vendor with the stored settings and
    credentials, nothing stored. `http_status` is the vendor's last answer (None: none came);
    `records` the records on that page (None: no page was read); `detail` what happened and
    `action` what to change (None when ok); `retry_after_seconds` the wait the vendor asked for."""

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
