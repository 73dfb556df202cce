"""Running a prepared probe (`service.evidence.probes.prepare_probe`): send its requests to the
endpoint (and a reference test's to the reference endpoint), score the answers as its test says,
and store the report, or why it failed.

The probe's status and progress are written as it goes, each in a unit of work of its own: they
are read while it runs, must survive a process that stops, and no connection is held while the
endpoint is called.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx
from sqlalchemy.engine import Engine

from curation.evidence.logprob_runner import score_texts_sync
from curation.evidence.membership import PromptNotCovered
from curation.evidence.membership_report import membership_report
from curation.evidence.probe_report import probe_report
from curation.evidence.probe_runner import complete_sync
from curation.evidence.probing import ProbePlan
from schemas.common import utcnow
from schemas.evidence import ProbeReport
from schemas.probe_tests import primary_metric_for
from schemas.probes import Probe, ProbeStatus
from service.core.db import write_transaction
from service.core.tracing import annotate, traced
from service.evidence.probes import PreparedProbe

PROGRESS_INTERVAL_SECONDS = 1.0

Progress = Callable[[int, int], None]


class ProbeStopped(Exception):
    """The service is stopping: requests not yet sent are not sent."""


class _StoppableTransport(httpx.BaseTransport):
    """Sends through `inner` until `stop` is set; then refuses before anything leaves."""

    def __init__(self, inner: httpx.BaseTransport, stop: threading.Event) -> None:
        self._inner = inner
        self._stop = stop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self._stop.is_set():
            raise ProbeStopped("the service is stopping")
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def _update(engine: Engine, probe_id: int, **values: object) -> None:
    """Set `values` on the probe in a unit of work of its own, committed at once: the probe's
    status and progress must be seen while it runs and survive a process that stops, and no
    connection is held while the endpoint is called."""
    with write_transaction(engine) as session:
        probe = session.get(Probe, probe_id)
        assert probe is not None
        for key, value in values.items():
            setattr(probe, key, value)
        session.add(probe)


def _run(client: httpx.Client, prepared: PreparedProbe, progress: Progress) -> tuple[ProbeReport, int]:
    """Send the prepared probe's requests and make its report, as its test says; with the number
    of requests answered or given up on. Raises what the runners and reports raise."""
    plan, data = prepared.plan, prepared.data
    if isinstance(plan, ProbePlan):
        completions = complete_sync(client, plan.prompts, prepared.endpoint, clock=time.time, progress=progress)
        primary = data.primary_metric or primary_metric_for(prepared.test, has_top_logprobs=False)
        return probe_report(plan, completions, cutoff=prepared.cutoff, model=prepared.model, alpha=data.alpha, primary_metric=primary), len(completions)
    reference = prepared.reference
    total = len(plan.texts) * (2 if reference is not None else 1)
    offset = 0

    def counted(done: int, _: int) -> None:
        progress(offset + done, total)

    target = score_texts_sync(client, plan, prepared.endpoint, via=prepared.logprobs, endpoint_name=prepared.endpoint_name, clock=time.time, progress=counted)
    calibration = None
    if reference is not None:
        offset = len(plan.texts)
        calibration = score_texts_sync(client, plan, reference.endpoint, via=reference.logprobs, endpoint_name=reference.name, clock=time.time, progress=counted)
    report = membership_report(
        plan,
        target,
        cutoff=prepared.cutoff,
        model=prepared.model,
        reference=calibration,
        reference_model=reference.model if reference is not None else None,
        reference_endpoint=reference.name if reference is not None else None,
        alpha=data.alpha,
        primary_metric=data.primary_metric,
    )
    return report, total


@traced("goldenset.probe")
def execute_probe(
    engine: Engine, prepared: PreparedProbe, *, transport: httpx.BaseTransport | None = None, stop: threading.Event | None = None, progress: Progress | None = None
) -> ProbeReport | None:
    """Send the prepared probe, score it and store the report (`done`), or store why it failed
    (`failed`). Returns the report, or None when it failed. Never raises for a failed probe."""
    annotate(probe_id=prepared.probe_id, test=prepared.test.value)
    stop = stop or threading.Event()
    _update(engine, prepared.probe_id, status=ProbeStatus.RUNNING.value, started_at=utcnow(), heartbeat_at=utcnow())
    last = 0.0

    def on_progress(done: int, total: int) -> None:
        nonlocal last
        if progress is not None:
            progress(done, total)
        now = time.monotonic()
        if done == total or now - last >= PROGRESS_INTERVAL_SECONDS:
            last = now
            _update(engine, prepared.probe_id, done=done, heartbeat_at=utcnow())

    try:
        with httpx.Client(transport=_StoppableTransport(transport or httpx.HTTPTransport(), stop)) as client:
            report, sent = _run(client, prepared, on_progress)
    except Exception as exc:  # a background job records every failure rather than losing it
        if isinstance(exc, ProbeStopped):
            error = "interrupted: the service stopped while probing; start the probe again"
        elif isinstance(exc, PromptNotCovered):
            error = f"the {prepared.test.value} test cannot run: {exc}"
        elif isinstance(exc, ValueError):
            error = f"no report: {exc}"
        else:
            error = f"the probe failed ({type(exc).__name__}): {exc}"
        _update(engine, prepared.probe_id, status=ProbeStatus.FAILED.value, error=error, finished_at=utcnow())
        annotate(status=ProbeStatus.FAILED.value, failure=type(exc).__name__)
        return None
    _update(engine, prepared.probe_id, status=ProbeStatus.DONE.value, report=report.model_dump(mode="json"), done=sent, finished_at=utcnow(), heartbeat_at=utcnow())
    annotate(status=ProbeStatus.DONE.value)
    return report
