"""The app's background probe runner: a small thread pool owned by the app, so a probe never runs
on the event loop and a request returns as soon as the probe is recorded."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
from sqlalchemy.engine import Engine

from schemas.common import utcnow
from schemas.evidence import ProbeReport
from schemas.probes import Probe, ProbeStatus
from service.core.db import write_transaction
from service.evidence.probe_execution import execute_probe
from service.evidence.probes import PreparedProbe


class ProbeWorker:
    """Runs prepared probes, `max_workers` at a time. `transport` replaces the HTTP transport (tests).

    `shutdown` stops at once: queued probes are marked failed, running ones send nothing more and
    are marked failed (interrupted)."""

    def __init__(self, engine: Engine, *, max_workers: int = 2, transport: httpx.BaseTransport | None = None) -> None:
        self._engine = engine
        self._transport = transport
        self._stop = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="probe-job")
        self._pending: dict[int, Future[ProbeReport | None]] = {}
        self._lock = threading.Lock()

    def submit(self, prepared: PreparedProbe) -> Future[ProbeReport | None]:
        """Queue `prepared`; the future gives its report (None when it failed)."""
        future = self._executor.submit(execute_probe, self._engine, prepared, transport=self._transport, stop=self._stop)
        with self._lock:
            self._pending[prepared.probe_id] = future
        future.add_done_callback(lambda _: self._forget(prepared.probe_id))
        return future

    def _forget(self, probe_id: int) -> None:
        with self._lock:
            self._pending.pop(probe_id, None)

    def shutdown(self) -> None:
        """Stop sending, mark the probes that will not finish, and let the threads wind down."""
        self._stop.set()
        with self._lock:
            cancelled = [probe_id for probe_id, future in self._pending.items() if future.cancel()]
        self._executor.shutdown(wait=False, cancel_futures=True)
        for probe_id in cancelled:
            with write_transaction(self._engine) as session:  # one unit of work per probe: each mark stands on its own
                probe = session.get(Probe, probe_id)
                if probe is not None and probe.status == ProbeStatus.QUEUED.value:
                    probe.status, probe.error, probe.finished_at = ProbeStatus.FAILED.value, "the service stopped before the probe started; start it again", utcnow()
                    session.add(probe)
