"""Prometheus metrics of one app instance (its own registry, so several apps can live in a process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from schemas.problem import IngestSummary


class Metrics:
    """Counters of ingested and rejected items by source, and request durations by route."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.items_ingested = Counter(
            "goldenset_items_ingested", "Records read by ingest and kept, by source and outcome (new, updated, unchanged, stale).", ["source", "outcome"], registry=self.registry
        )
        self.items_rejected = Counter("goldenset_items_rejected", "Records rejected by ingest, by source and reason.", ["source", "reason"], registry=self.registry)
        self.request_duration = Histogram(
            "goldenset_request_duration_seconds", "HTTP request durations, by method, route template and status.", ["method", "route", "status"], registry=self.registry
        )

    def record_ingest(self, summary: IngestSummary) -> None:
        for outcome in ("new", "updated", "unchanged", "stale"):
            count = getattr(summary, outcome)
            if count:
                self.items_ingested.labels(summary.source, outcome).inc(count)
        for reason, count in summary.rejected_by_reason.items():
            self.items_rejected.labels(summary.source, reason).inc(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)
