"""Prometheus metrics of one app instance (its own registry, so several apps can live in a process).

Two kinds: counters of what this process did (ingest through its API, request durations), and
gauges of the system's state read from the database at scrape time (`DatabaseCollector`), so work
done by any process (a CLI ingest, the scheduler's curation and pulls, another replica) shows on
every process's `/metrics`. The scheduler, which serves no API, can expose the same gauges on a
port of its own, with its health beside them (`serve_scheduler_metrics`)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from http import HTTPStatus
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import and_, func, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.state import pending_count
from curation.review_backlog import waiting_for_review
from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.dedup import DedupDecision
from schemas.evals import Eval
from schemas.item import Item
from schemas.probes import Probe, ProbeStatus
from schemas.problem import IngestSummary
from schemas.release import Release, SealedRead
from schemas.runs import Run
from schemas.source import Source, SourceStatus
from service.core.problems import PROBLEM_MEDIA_TYPE

logger = logging.getLogger("goldenset.metrics")
DATABASE_CACHE_SECONDS = 5.0
"""How long one reading of the database serves scrapes (several Prometheus servers, or a reload
of the dashboard, cost one set of queries)."""
HEALTH_PATH = "/healthz"


class Metrics:
    """Counters of ingested and rejected items by source, and request durations by route; with an
    engine, also the database's state (`DatabaseCollector`)."""

    def __init__(self, engine: Engine | None = None, *, database_cache_seconds: float = DATABASE_CACHE_SECONDS) -> None:
        self.registry = CollectorRegistry()
        self.items_ingested = Counter(
            "goldenset_items_ingested", "Records read by ingest and kept, by source and outcome (new, updated, unchanged, stale).", ["source", "outcome"], registry=self.registry
        )
        self.items_rejected = Counter("goldenset_items_rejected", "Records rejected by ingest, by source and reason.", ["source", "reason"], registry=self.registry)
        self.rate_limited = Counter(
            "goldenset_rate_limited", "Requests refused with 429 by a rate limit (sign_in, unauthorized, sealed_check).", ["limit"], registry=self.registry
        )
        self.sign_ins_refused = Counter(
            "goldenset_sign_ins_refused",
            "Sign-ins refused for their token, by whether an audit event was written (only the first few of a burst are).",
            ["audited"],
            registry=self.registry,
        )
        self.request_duration = Histogram(
            "goldenset_request_duration_seconds", "HTTP request durations, by method, route template and status.", ["method", "route", "status"], registry=self.registry
        )
        self.database: DatabaseCollector | None = None
        if engine is not None:
            self.database = DatabaseCollector(engine, cache_seconds=database_cache_seconds)
            self.registry.register(self.database)

    def record_ingest(self, summary: IngestSummary) -> None:
        for outcome in ("new", "updated", "unchanged", "stale"):
            count = getattr(summary, outcome)
            if count:
                self.items_ingested.labels(summary.source, outcome).inc(count)
        for reason, count in summary.rejected_by_reason.items():
            self.items_rejected.labels(summary.source, reason).inc(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _age_seconds(now: datetime, then: datetime | None) -> float | None:
    return None if then is None else max(0.0, (now - then).total_seconds())


class DatabaseCollector(Collector):
    """Gauges of the state every process shares, read from the database when scraped.

    Cost: about a dozen aggregate queries per reading, each a count or max over an indexed column
    (item status and source, probe status, release and sealed-read release, audit action) or over
    small tables (sources, evals, releases per eval); `dedup_decision` is counted by stage and status
    in one scan. A reading serves scrapes for `cache_seconds`. When the database cannot be read,
    `goldenset_database_up` is 0 and the other gauges are left out of that scrape."""

    def __init__(self, engine: Engine, *, cache_seconds: float = DATABASE_CACHE_SECONDS) -> None:
        self.engine = engine
        self.cache_seconds = cache_seconds
        self._lock = threading.Lock()
        self._cached: tuple[float, list[GaugeMetricFamily]] | None = None

    def describe(self) -> Iterable[GaugeMetricFamily]:
        # Nothing up front: describing would query the database when the collector is registered.
        return []

    def collect(self) -> Iterable[GaugeMetricFamily]:
        with self._lock:
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < self.cache_seconds:
                return list(self._cached[1])
            families = self._read()
            self._cached = (now, families)
            return list(families)

    def clear_cache(self) -> None:
        """Make the next scrape read the database again."""
        with self._lock:
            self._cached = None

    def _read(self) -> list[GaugeMetricFamily]:
        up = GaugeMetricFamily("goldenset_database_up", "1 when the state gauges below could be read from the database, 0 when it failed.")
        try:
            with Session(self.engine) as session:
                families = list(_state_families(session))
        except Exception as exc:
            logger.warning("metrics: the database could not be read: %s", type(exc).__name__)
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [up, *families]


def _state_families(session: Session) -> Iterator[GaugeMetricFamily]:
    now = utcnow()
    # Sources and evals are few (tens); their rows are read whole.
    sources = session.exec(select(Source)).all()
    source_names = {source.id: source.name for source in sources}

    items = GaugeMetricFamily("goldenset_items", "Items stored, by source and status (candidate, unique, duplicate, approved, ...).", labels=["source", "status"])
    for source_id, status, count in session.exec(select(Item.source_id, Item.status, func.count()).group_by(col(Item.source_id), col(Item.status))).all():
        items.add_metric([source_names.get(source_id, str(source_id)), status], count)
    yield items

    pending = GaugeMetricFamily("goldenset_candidates_pending", "Items the next curation run would decide (candidates, and reference items not yet indexed).")
    pending.add_metric([], pending_count(session))
    yield pending

    decisions = GaugeMetricFamily(
        "goldenset_curation_decisions", "Dedup decisions recorded, by stage (exact, minhash, embedding, override, none) and status.", labels=["stage", "status"]
    )
    for stage, status, count in session.exec(select(DedupDecision.stage, DedupDecision.status, func.count()).group_by(col(DedupDecision.stage), col(DedupDecision.status))).all():
        decisions.add_metric([stage, status], count)
    yield decisions
    last_decision = GaugeMetricFamily("goldenset_curation_last_decision_timestamp_seconds", "When curation last decided an item (Unix time; no sample before the first).")
    newest = session.exec(select(DedupDecision.decided_at).order_by(col(DedupDecision.id).desc()).limit(1)).first()
    if newest is not None:
        last_decision.add_metric([], newest.timestamp())
    yield last_decision

    yield from _source_families(session, now, sources)
    evals = session.exec(select(Eval)).all()
    yield from _release_families(session, now, evals)

    backlog = GaugeMetricFamily(
        "goldenset_review_backlog_items",
        "Items waiting for review on each eval: unique in its sources, less those an eval with automatic approval already took (its review queue's total).",
        labels=["eval"],
    )
    for name, waiting in waiting_for_review(session, evals).items():
        backlog.add_metric([name], waiting)
    yield backlog

    probes = GaugeMetricFamily("goldenset_probes", "Completion probes, by status.", labels=["status"])
    probe_counts = dict(session.exec(select(Probe.status, func.count()).group_by(col(Probe.status))).all())
    for status in ProbeStatus:
        probes.add_metric([status.value], probe_counts.pop(status.value, 0))
    for status, count in probe_counts.items():
        probes.add_metric([status], count)
    yield probes

    eval_names = {evaluation.id: evaluation.name for evaluation in evals}
    runs = GaugeMetricFamily("goldenset_runs", "Model runs started, by eval and split.", labels=["eval", "split"])
    for eval_id, split, count in session.exec(select(Run.eval_id, Run.split, func.count()).group_by(col(Run.eval_id), col(Run.split))).all():
        runs.add_metric([eval_names.get(eval_id, str(eval_id)), split], count)
    yield runs


def _source_families(session: Session, now: datetime, sources: Sequence[Source]) -> Iterator[GaugeMetricFamily]:
    state = GaugeMetricFamily(
        "goldenset_source_status", "1 for each source's current pull status (idle, running, ok, error, auth_failed), 0 for the others.", labels=["source", "status"]
    )
    success_age = GaugeMetricFamily(
        "goldenset_source_last_success_age_seconds", "Seconds since each source's last successful pull (sources never pulled are left out).", labels=["source"]
    )
    run_age = GaugeMetricFamily("goldenset_source_last_pull_age_seconds", "Seconds since each source's last pull started, whatever its outcome.", labels=["source"])
    pulled = GaugeMetricFamily("goldenset_source_items_pulled", "Items each source's pulls have stored (new or updated), all pulls together.", labels=["source"])
    for source in sources:
        for known in SourceStatus:
            state.add_metric([source.name, known.value], 1 if source.status == known.value else 0)
        if (age := _age_seconds(now, source.last_success_at)) is not None:
            success_age.add_metric([source.name], age)
        if (age := _age_seconds(now, source.last_run_at)) is not None:
            run_age.add_metric([source.name], age)
        pulled.add_metric([source.name], source.items_pulled)
    pulls = GaugeMetricFamily("goldenset_source_pulls_succeeded", "Successful pulls recorded in the audit trail, by source.", labels=["source"])
    query = select(AuditEvent.object_id, func.count()).where(AuditEvent.action == AuditAction.SOURCE_PULL).group_by(col(AuditEvent.object_id))
    for object_id, count in session.exec(query).all():
        pulls.add_metric([object_id or ""], count)
    yield from (state, success_age, run_age, pulled, pulls)


def _release_families(session: Session, now: datetime, evals: Sequence[Eval]) -> Iterator[GaugeMetricFamily]:
    releases = GaugeMetricFamily("goldenset_releases", "Releases in force (written by a refresh, one per period, and not withdrawn), by eval.", labels=["eval"])
    withdrawn = GaugeMetricFamily("goldenset_releases_withdrawn", "Releases an admin withdrew, by eval.", labels=["eval"])
    latest_age = GaugeMetricFamily("goldenset_release_latest_age_seconds", "Seconds since each eval's latest release was written.", labels=["eval"])
    latest_number = GaugeMetricFamily("goldenset_release_latest_number", "The number of each eval's latest release.", labels=["eval"])
    budget_left = GaugeMetricFamily("goldenset_sealed_reads_left", "Sealed reads (and sealed runs) each eval's latest release may still serve under its budget.", labels=["eval"])
    budget_used = GaugeMetricFamily("goldenset_sealed_reads_used", "Sealed reads (and sealed runs) each eval's latest release has served.", labels=["eval"])
    in_force = col(Release.withdrawn_at).is_(None)
    per_eval = {
        eval_id: (count, number)
        for eval_id, count, number in session.exec(select(Release.eval_id, func.count(), func.max(Release.number)).where(in_force).group_by(col(Release.eval_id))).all()
    }
    withdrawn_per_eval = dict(session.exec(select(Release.eval_id, func.count()).where(col(Release.withdrawn_at).is_not(None)).group_by(col(Release.eval_id))).all())
    # The latest release is the newest one not withdrawn (as `latest` resolves in the API).
    newest = select(Release.eval_id, func.max(Release.number).label("number")).where(in_force).group_by(col(Release.eval_id)).subquery()
    latest_query = select(Release.id, Release.eval_id, Release.created_at).join(newest, and_(col(Release.eval_id) == newest.c.eval_id, col(Release.number) == newest.c.number))
    latest = {release_id: (eval_id, created_at) for release_id, eval_id, created_at in session.exec(latest_query).all() if release_id is not None}
    used_by_release = dict(
        session.exec(select(SealedRead.release_id, func.count()).where(col(SealedRead.release_id).in_(sorted(latest))).group_by(col(SealedRead.release_id))).all()
    )
    latest_by_eval = {eval_id: (release_id, created_at) for release_id, (eval_id, created_at) in latest.items()}
    for evaluation in evals:
        name, budget = evaluation.name, evaluation.sealed_read_budget
        count, number = per_eval.get(evaluation.id, (0, 0)) if evaluation.id is not None else (0, 0)
        releases.add_metric([name], count)
        withdrawn.add_metric([name], withdrawn_per_eval.get(evaluation.id, 0) if evaluation.id is not None else 0)
        if evaluation.id not in latest_by_eval:
            continue
        release_id, created_at = latest_by_eval[evaluation.id]
        used = int(used_by_release.get(release_id, 0))
        latest_age.add_metric([name], _age_seconds(now, created_at) or 0.0)
        latest_number.add_metric([name], number)
        budget_used.add_metric([name], used)
        budget_left.add_metric([name], max(0, budget - used))
    yield from (releases, withdrawn, latest_age, latest_number, budget_used, budget_left)


def serve_scheduler_metrics(
    engine: Engine,
    port: int,
    *,
    scheduler_running: Callable[[], bool] | None = None,
    address: str = "0.0.0.0",  # noqa: S104 (Prometheus and the orchestrator's probes reach it from another host)
) -> Metrics:
    """Serve, in daemon threads, a scheduler process's port (it serves no API): the database's
    gauges (`DatabaseCollector`) at `/metrics` (and any other path, as Prometheus' own server
    does), and the worker's health at `/healthz` (`worker_health`; `scheduler_running` says
    whether its scheduler runs, and without it the scheduler counts as stopped). Neither needs a
    token: keep the port inside the deployment's network."""
    metrics = Metrics(engine)
    exporter = make_wsgi_app(metrics.registry)
    running = scheduler_running or (lambda: False)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != HEALTH_PATH:
            metrics_body: Iterable[bytes] = exporter(environ, start_response)
            return metrics_body
        status, body = worker_health(engine, scheduler_running=running())
        payload = json.dumps(body).encode()
        media_type = "application/json" if status == 200 else PROBLEM_MEDIA_TYPE
        start_response(f"{status} {HTTPStatus(status).phrase}", [("Content-Type", media_type), ("Content-Length", str(len(payload))), ("Cache-Control", "no-store")])
        return [payload]

    server = make_server(address, port, app, _ThreadingServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="scheduler-metrics", daemon=True).start()
    logger.info("serving scheduler metrics on %s:%s/metrics and its health on %s", address, port, HEALTH_PATH)
    return metrics


def worker_health(engine: Engine, *, scheduler_running: bool) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of a scheduler process's `/healthz`: 200 `{"status": "ok",
    "database": "ok", "role": "worker", "scheduler": "running"}`, or 503 with a problem document
    (as the API's `/healthz`) naming what is wrong: the database is unreachable, or the scheduler
    is not running."""
    problems = []
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as exc:
        problems.append(f"the database is unreachable: {type(exc).__name__}")
    if not scheduler_running:
        problems.append("the scheduler is not running")
    if problems:
        return 503, {"type": "about:blank", "title": "Service Unavailable", "status": 503, "detail": "; ".join(problems), "instance": HEALTH_PATH}
    return 200, {"status": "ok", "database": "ok", "role": "worker", "scheduler": "running"}


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    """Logs no line per request (probes and scrapes come every few seconds)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass
