"""Shared by several operations: problem documents, and the summary of an ingest (a push or a
pull) with its rejected records."""

from typing import Any

from pydantic import Field

from goldenset_client.models._base import _Response


class RecordError(_Response):
    """One rejected record: where it was (`position`: line number for JSONL/CSV, 0-based index for a
    JSON array), a machine-readable `reason` code and a `detail` a person can act on."""

    position: int
    locator: str
    reason: str
    detail: str
    external_id: str | None = None


class IngestSummary(_Response):
    """Counts of one ingest run. `read` = new + updated + unchanged + stale + rejected."""

    source: str
    read: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    stale: int = 0
    rejected: int = 0
    rejected_by_reason: dict[str, Any] = Field(default_factory=dict)
    redacted: dict[str, Any] = Field(default_factory=dict)
    errors: list[RecordError] = Field(default_factory=list)


class Problem(_Response):
    """An error answer (RFC 9457 `application/problem+json`). Members beyond these (`condition`,
    `errors`, `summary`, ...) are kept in `GoldensetError.problem`."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None


class PullStarted(_Response):
    """`POST /v1/sources/{name}/pull` without `wait`: the pull runs in the background; follow it
    with `get_source(name)`. Not a schema of the OpenAPI document (the 202 answer has none)."""

    status: str
    source: str
    follow: str
