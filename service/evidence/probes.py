"""Completion probes in the service: prepare (choose items, gate, ledger, cut), run (send, score,
store the report), and show.

Safety, in order: an eval's items are its release's dev items only (sealed items are left out,
and `plan_probes` refuses any that slip through); the endpoint must serve the model; unless the
request says `allow_exposure`, the endpoint's terms must pass the gate's terms conditions
(`curation.runs.gate.judge_terms`: it does not train on inputs, terms checked recently), or the probe
is refused with 403 naming the failing condition, and audited. Every item to be sent is written
to the exposure ledger as a dev run (`curation.runs.ledger`) before the first request goes out, and
marked exposed when the endpoint may train on inputs, exactly as a dev run does. A public corpus
is already public: no gate, no ledger.

The endpoint's API key comes from the request (held in memory for that probe only) or from the
environment variable `GOLDENSET_ENDPOINT_KEY_<ENDPOINT>`; it is never stored or logged.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

import httpx
from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.evidence.probe_items import corpus_probe_items, eval_probe_items
from curation.evidence.probe_report import MIN_BAND, MIN_CONTROL_ITEMS, MIN_PRE_CUTOFF_ITEMS, probe_report
from curation.evidence.probe_runner import complete_sync
from curation.evidence.probing import ProbePlan, SealedItemRefused, plan_probes
from curation.runs.gate import judge_terms
from curation.runs.ledger import record_run
from schemas.audit import AuditAction, AuditEvent
from schemas.common import read_model, utcnow
from schemas.evals import Eval, Split
from schemas.evidence import ProbeEndpoint, ProbeItem, ProbeReport, cutoff_instant
from schemas.model_registry import Endpoint, Model
from schemas.probes import Probe, ProbeCreate, ProbeRead, ProbeStatus
from schemas.release import Release
from schemas.runs import Run
from schemas.source import Source
from service.core.db import write_session
from service.core.problems import ProblemError
from service.core.tracing import annotate, traced
from service.evals.definitions import require_eval
from service.evals.releases import resolve_release
from service.evidence.temporal_split import require_corpus, require_cutoff
from service.runs.model_registry import require_serving_endpoint

KEY_VARIABLE_PREFIX = "GOLDENSET_ENDPOINT_KEY_"
STALE_AFTER = timedelta(minutes=15)
"""A running probe with no progress for this long belongs to a process that stopped."""
PROGRESS_INTERVAL_SECONDS = 1.0

Progress = Callable[[int, int], None]
ApiKeyFrom = Literal["request", "environment", "none"]


class ProbeStopped(Exception):
    """The service is stopping: requests not yet sent are not sent."""


def key_variable(endpoint: str) -> str:
    """The environment variable holding an endpoint's API key: `GOLDENSET_ENDPOINT_KEY_` and the
    endpoint's name in capitals, every other character as `_` (`acme/gpt-4o` → `..._ACME_GPT_4O`)."""
    return KEY_VARIABLE_PREFIX + re.sub(r"[^A-Z0-9]", "_", endpoint.upper())


@dataclass(frozen=True)
class PreparedProbe:
    """A probe written to the database and ready to run: its plan (cuts and prompts, in memory
    only) and where to send it."""

    probe_id: int
    plan: ProbePlan
    endpoint: ProbeEndpoint
    model: str
    cutoff: date
    data: ProbeCreate
    api_key_from: ApiKeyFrom
    key_variable: str
    """The environment variable the key is read from when the request brings none."""


AUGMENTED_CONDITION = "augmented_endpoint"
"""The `condition` of a probe refused because its endpoint has retrieval, web search or tools."""


def _refuse(session: Session, evaluation: Eval, endpoint: Endpoint, actor: str, condition: str, detail: str) -> ProblemError:
    details = {"condition": condition, "endpoint": endpoint.name, "trains_on_inputs": endpoint.trains_on_inputs}
    session.add(AuditEvent(actor=actor, action=AuditAction.PROBE_REFUSED, object_type="eval", object_id=evaluation.name, count=0, details=details))
    session.commit()
    return ProblemError(
        403,
        "Probe refused",
        f"{detail}; or, accepting that every probed item is then marked exposed and leaves the eval at its next refresh, send allow_exposure: true",
        condition=condition,
    )


def _refuse_augmented(session: Session, endpoint: Endpoint, actor: str) -> ProblemError:
    """The 403 for a probe of an augmented endpoint, audited: a model that can retrieve or search
    may complete an item's text because it found it, not because it was trained on it."""
    which = ", ".join(endpoint.augmentations) or "retrieval, web search or tools"
    session.add(
        AuditEvent(
            actor=actor,
            action=AuditAction.PROBE_REFUSED,
            object_type="endpoint",
            object_id=endpoint.name,
            count=0,
            details={"condition": AUGMENTED_CONDITION, "endpoint": endpoint.name, "augmentations": endpoint.augmentations},
        )
    )
    session.commit()
    return ProblemError(
        403,
        "Probe refused",
        f"endpoint {endpoint.name!r} is augmented ({which}): a completion probe needs the bare model, since a model that can look an item up "
        "completes it without having been trained on it; probe an endpoint serving the model without them, or, if this one has none, "
        f"record that with PATCH /v1/endpoints/{endpoint.name} {{\"augmented\": false}}; nothing was sent",
        condition=AUGMENTED_CONDITION,
    )


def _plan(items: list[ProbeItem], data: ProbeCreate, dataset: str, split: str, cutoff: date) -> ProbePlan:
    try:
        plan = plan_probes(items, dataset=dataset, split=split, policy=data.cut_policy)
    except SealedItemRefused as exc:
        raise ProblemError(409, "Sealed items refused", f"{exc}; nothing was sent") from exc
    instant = cutoff_instant(cutoff)
    before = sum(1 for prompt in plan.prompts if plan.items[prompt.item_id].occurred_at < instant)
    after = len(plan.prompts) - before
    if before < MIN_PRE_CUTOFF_ITEMS or after < MIN_CONTROL_ITEMS:
        raise ProblemError(
            422,
            "Too few items",
            f"{before} items to probe are dated before the model's training cutoff ({cutoff.isoformat()}) and {after} on or after it; "
            f"the probe compares the two and needs at least {MIN_PRE_CUTOFF_ITEMS} before and {MIN_CONTROL_ITEMS} after ({MIN_BAND} or more each to be useful); nothing was sent",
            before=before,
            after=after,
            not_cut=len(plan.not_cut),
            reason="too_few_items",
        )
    return plan


def prepare_probe(*, engine: Engine, data: ProbeCreate, actor: str, terms_max_age_days: int, environ: Mapping[str, str] | None = None) -> PreparedProbe:
    """Choose, gate, record and cut the items of a probe, and write the probe `queued`. Nothing is
    sent yet. `terms_max_age_days`: how recently a `no` endpoint's terms must have been checked.
    Raises ProblemError: 404 (eval, release, corpus, model, endpoint), 422 (no cutoff,
    the endpoint serves another model, too few items on a side of the cutoff), 403 (the
    endpoint is augmented, `condition` augmented_endpoint; or its terms fail the gate; `condition` names which), 409 (a sealed item reached the plan)."""
    environ = os.environ if environ is None else environ
    with write_session(engine) as session:
        model, endpoint = require_serving_endpoint(session=session, model=data.model, endpoint=data.endpoint)
        if endpoint.augmented:
            raise _refuse_augmented(session, endpoint, actor)
        variable = key_variable(endpoint.name)
        env_key = environ.get(variable)
        api_key_from: ApiKeyFrom = "request" if data.api_key else ("environment" if env_key else "none")
        cutoff = require_cutoff(model)
        evaluation: Eval | None = None
        release: Release | None = None
        corpus: Source | None = None
        if data.eval is not None:
            evaluation = require_eval(session=session, name=data.eval)
            release = resolve_release(session=session, evaluation=evaluation, ref=str(data.release))
            if not data.allow_exposure:
                decision = judge_terms(
                    endpoint=endpoint.name,
                    trains_on_inputs=endpoint.trains_on_inputs,
                    terms_checked_at=endpoint.terms_checked_at,
                    now=utcnow(),
                    terms_max_age_days=terms_max_age_days,
                )
                if not decision.allowed:
                    assert decision.condition is not None
                    raise _refuse(session, evaluation, endpoint, actor, decision.condition.value, decision.detail)
            rows, items = eval_probe_items(session=session, release=release, cutoff=cutoff, limit=data.limit)
            dataset, split = data.dataset_name or evaluation.name, data.split_name or Split.DEV.value
        else:
            assert data.corpus is not None
            corpus = require_corpus(session=session, name=data.corpus)
            corpus_rows, items = corpus_probe_items(session=session, corpus=corpus, cutoff=cutoff, limit=data.limit)
            dataset, split = data.dataset_name or corpus.name, data.split_name or "test"
        plan = _plan(items, data, dataset, split, cutoff)
        sent = {prompt.item_id for prompt in plan.prompts}
        run_id: int | None = None
        if evaluation is not None and release is not None:
            chosen = [row for row in rows if str(row.item_id) in sent]
            run_id = record_run(session, evaluation=evaluation, release=release, model=model, endpoint=endpoint, split=Split.DEV, items=chosen, actor=actor, now=utcnow()).id
            item_ids = [row.item_id for row in chosen]
        else:
            item_ids = [item.id for item in corpus_rows if item.external_id in sent and item.id is not None]
        assert model.id is not None and endpoint.id is not None
        settings = data.model_dump(mode="json", exclude={"api_key", "eval", "corpus", "model", "endpoint", "release"})
        probe = Probe(
            eval_id=evaluation.id if evaluation else None,
            release_id=release.id if release else None,
            source_id=corpus.id if corpus else None,
            model_id=model.id,
            endpoint_id=endpoint.id,
            run_id=run_id,
            dataset=dataset,
            split=split,
            settings={**settings, "api_key_from": api_key_from},
            item_ids=item_ids,
            total=len(plan.prompts),
            actor=actor,
            heartbeat_at=utcnow(),
        )
        session.add(probe)
        session.flush()
        assert probe.id is not None
        target = {"eval": evaluation.name, "release": release.number} if evaluation and release else {"corpus": data.corpus}
        details = {**target, "endpoint": endpoint.name, "run_id": run_id}
        session.add(AuditEvent(actor=actor, action=AuditAction.PROBE_START, object_type="probe", object_id=str(probe.id), count=len(item_ids), details=details))
        session.commit()
        api_key = data.api_key or (SecretStr(env_key) if env_key else None)
        target_endpoint = ProbeEndpoint(
            base_url=endpoint.base_url,
            model=data.remote_model or model.name,
            api_key=api_key,
            concurrency=data.concurrency,
            timeout_seconds=data.timeout_seconds,
            max_attempts=data.max_attempts,
        )
        return PreparedProbe(
            probe_id=probe.id, plan=plan, endpoint=target_endpoint, model=model.name, cutoff=cutoff, data=data, api_key_from=api_key_from, key_variable=variable
        )


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
    with write_session(engine) as session:
        probe = session.get(Probe, probe_id)
        assert probe is not None
        for key, value in values.items():
            setattr(probe, key, value)
        session.add(probe)
        session.commit()


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


def require_probe(*, session: Session, probe_id: int) -> Probe:
    probe = session.get(Probe, probe_id)
    if probe is None:
        raise ProblemError(404, "Not Found", f"no probe with id {probe_id}; start one with POST /v1/probes")
    return probe


def probe_read(session: Session, probe: Probe, *, now: datetime | None = None) -> ProbeRead:
    """The probe as the API shows it. A running probe with no progress for `STALE_AFTER` shows as
    failed: the process running it stopped."""
    assert probe.id is not None
    names = {
        "eval": session.get(Eval, probe.eval_id).name if probe.eval_id else None,  # type: ignore[union-attr]
        "release": session.get(Release, probe.release_id).number if probe.release_id else None,  # type: ignore[union-attr]
        "corpus": session.get(Source, probe.source_id).name if probe.source_id else None,  # type: ignore[union-attr]
    }
    model, endpoint = session.get(Model, probe.model_id), session.get(Endpoint, probe.endpoint_id)
    assert model is not None and endpoint is not None
    run = session.get(Run, probe.run_id) if probe.run_id else None
    status, error = ProbeStatus(probe.status), probe.error
    beat = probe.heartbeat_at or probe.created_at
    if status in (ProbeStatus.QUEUED, ProbeStatus.RUNNING) and (now or utcnow()) - beat > STALE_AFTER:
        status, error = ProbeStatus.FAILED, f"no progress since {beat:%Y-%m-%d %H:%M} UTC: the process running it stopped; start the probe again"
    report = ProbeReport.model_validate(probe.report) if probe.report is not None and status is ProbeStatus.DONE else None
    return read_model(
        ProbeRead, probe, **names, model=model.name, endpoint=endpoint.name, status=status, error=error, exposes_items=bool(run and run.exposes_items), report=report
    )


def list_probes(*, session: Session, limit: int = 100) -> list[ProbeRead]:
    """Probes, newest first."""
    return [probe_read(session, probe) for probe in session.exec(select(Probe).order_by(col(Probe.id).desc()).limit(limit)).all()]
