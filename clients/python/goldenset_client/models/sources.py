"""Sources: where items come from (`/v1/sources`)."""

from datetime import datetime
from typing import Any

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
