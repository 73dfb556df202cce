"""Running a prepared completion probe (`service.evidence.probes.prepare_probe`): send its
prompts to the endpoint, score the completions, and store the report, or why it failed.

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

from curation.evidence.probe_report import probe_report
from curation.evidence.probe_runner import complete_sync
from schemas.common import utcnow
from schemas.evidence import ProbeReport
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


@traced("goldenset.probe")
def execute_probe(
    engine: Engine, prepared: PreparedProbe, *, transport: httpx.BaseTransport | None = None, stop: threading.Event | None = None, progress: Progress | None = None
) -> ProbeReport | None:
    """Send the prepared probe, score it and store the report (`done`), or store why it failed
    (`failed`). Returns the report, or None when it failed. Never raises for a failed probe."""
    annotate(probe_id=prepared.probe_id, prompts=len(prepared.plan.prompts))
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
            completions = complete_sync(client, prepared.plan.prompts, prepared.endpoint, clock=time.time, progress=on_progress)
        report = probe_report(prepared.plan, completions, cutoff=prepared.cutoff, model=prepared.model, alpha=prepared.data.alpha, primary_metric=prepared.data.primary_metric)
    except Exception as exc:  # a background job records every failure rather than losing it
        if isinstance(exc, ProbeStopped):
            error = "interrupted: the service stopped while probing; start the probe again"
        elif isinstance(exc, ValueError):
            error = f"no report: {exc}"
        else:
            error = f"the probe failed ({type(exc).__name__}): {exc}"
        _update(engine, prepared.probe_id, status=ProbeStatus.FAILED.value, error=error, finished_at=utcnow())
        annotate(status=ProbeStatus.FAILED.value, failure=type(exc).__name__)
        return None
    _update(engine, prepared.probe_id, status=ProbeStatus.DONE.value, report=report.model_dump(mode="json"), done=len(completions), finished_at=utcnow(), heartbeat_at=utcnow())
    annotate(status=ProbeStatus.DONE.value)
    return report
