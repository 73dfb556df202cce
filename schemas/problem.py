"""Error and summary shapes of the API: RFC 9457 problem details and the ingest summary."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RecordError(BaseModel):
    """One rejected record: where it was (`position`: line number for JSONL/CSV, 0-based index for
    a JSON array), a machine-readable `reason` code and a `detail` a person can act on."""

    position: int
    locator: str = Field(description="Human form of the position, e.g. 'line 12' or 'index 3'.")
    reason: str
    detail: str
    external_id: str | None = None


class IngestSummary(BaseModel):
    """Counts of one ingest run. `read` = new + updated + unchanged + stale + rejected.

    `stale`: records whose version (the mapping's `version`) is older than the stored item's, so
    they were not applied and changed nothing; they are not errors."""

    source: str
    read: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    stale: int = 0
    rejected: int = 0
    rejected_by_reason: dict[str, int] = Field(default_factory=dict)
    redacted: dict[str, int] = Field(default_factory=dict)
    errors: list[RecordError] = Field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """The outcome counts by name, in the order a person reads them."""
        return {"read": self.read, "new": self.new, "updated": self.updated, "unchanged": self.unchanged, "stale": self.stale, "rejected": self.rejected}

    @property
    def stored(self) -> int:
        """Records the items now hold (stale records are not stored: a newer version is)."""
        return self.new + self.updated + self.unchanged


class Problem(BaseModel):
    """`application/problem+json` (RFC 9457). Extra members carry details such as `errors`."""

    model_config = ConfigDict(extra="allow")

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
