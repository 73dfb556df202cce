"""Probes in the service: prepare (choose the test and items, gate, ledger, cut) and show; running
them (send, score, store the report) is `service.evidence.probe_execution`.

Safety, in order: an eval's items are its release's dev items only (sealed items are left out,
and `plan_probes` refuses any that slip through); the endpoint must serve the model; unless the
request says `allow_exposure`, the endpoint's terms must pass the gate's terms conditions
(`curation.runs.gate.judge_terms`: it does not train on inputs, terms checked recently), or the probe
is refused with 403 naming the failing condition, and audited. Every item to be sent is written
to the exposure ledger as a dev run (`curation.runs.ledger`) before the first request goes out, and
marked exposed when the endpoint may train on inputs, exactly as a dev run does. A public corpus
is already public: no gate, no ledger.

The test is chosen first (`service.evidence.probe_choice`: the strongest the endpoints' recorded
log-probabilities allow, or the one asked for). A reference test's reference endpoint is held to
the same rules as the probed one: refused when augmented, gated on its terms, and the items sent
there ledgered as a dev run of the reference model.

The endpoints' API keys come from the request (held in memory for that probe only) or from the
environment (`service.evidence.probe_keys`); they are never stored or logged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import NamedTuple

from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.evidence.logprob_runner import MembershipPlan, plan_membership
from curation.evidence.probe_items import corpus_probe_items, eval_probe_items
from curation.evidence.probe_report import MIN_BAND, MIN_CONTROL_ITEMS, MIN_PRE_CUTOFF_ITEMS
from curation.evidence.probing import ProbePlan, plan_probes
from curation.runs.gate import judge_terms
from curation.runs.ledger import record_run
from schemas.audit import AuditAction, AuditEvent
from schemas.common import read_model, utcnow
from schemas.evals import Eval, Split
from schemas.evidence import ProbeEndpoint, ProbeItem, ProbeReport, cutoff_instant
from schemas.item import Item
from schemas.model_registry import Endpoint, LogprobSupport, Model
from schemas.probe_tests import ProbeTest
from schemas.probes import Probe, ProbeCreate, ProbeRead, ProbeStatus
from schemas.release import Release, ReleaseItem
from schemas.runs import Run
from schemas.source import Source
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.evals.definitions import require_eval
from service.evals.refusal_audit import AuditedRefusal, refusals_audited
from service.evals.releases import resolve_release
from service.evidence.probe_choice import REASON, ReferenceEndpoint, choose_test, require_reference
from service.evidence.probe_keys import ApiKeyFrom, key_source
from service.evidence.temporal_split import require_corpus, require_cutoff
from service.runs.model_registry import require_serving_endpoint

STALE_AFTER = timedelta(minutes=15)
"""A running probe with no progress for this long belongs to a process that stopped."""

@dataclass(frozen=True)
class PreparedProbe:
    """A probe written to the database and ready to run: its test, its plan (cuts and prompts, or
    the texts to score; in memory only) and where to send it (and its reference)."""

    probe_id: int
    plan: ProbePlan | MembershipPlan
    endpoint: ProbeEndpoint
    model: str
    cutoff: date
    data: ProbeCreate
    api_key_from: ApiKeyFrom
    key_variable: str
    """The environment variable the key is read from when the request brings none."""
    test: ProbeTest = ProbeTest.COMPLETION
    endpoint_name: str = ""
    logprobs: LogprobSupport = LogprobSupport.NONE
    """How the endpoint gives log-probabilities (the log-probability tests' requests follow it)."""
    reference: PreparedReference | None = None

    @property
    def requests(self) -> int:
        """How many requests the probe sends, counting the reference's."""
        if isinstance(self.plan, ProbePlan):
            return len(self.plan.prompts)
        return len(self.plan.texts) * (2 if self.reference is not None else 1)


@dataclass(frozen=True)
class PreparedReference:
    """Where the reference test's requests go: the reference endpoint (`name`, how it gives
    log-probabilities) and the model it serves."""

    endpoint: ProbeEndpoint
    name: str
    model: str
    logprobs: LogprobSupport


AUGMENTED_CONDITION = "augmented_endpoint"
"""The `condition` of a probe refused because its endpoint has retrieval, web search or tools."""


@dataclass(frozen=True)
class ProbeTarget:
    """What a probe reads, as `items`, with the dataset and split names its report carries: the dev
    items of an eval's release (`evaluation`, `release`, and their frozen rows `release_rows`) or
    those of a public corpus (`corpus`, and its item rows `corpus_rows`)."""

    items: list[ProbeItem]
    dataset: str
    split: str
    evaluation: Eval | None = None
    release: Release | None = None
    release_rows: Sequence[ReleaseItem] = ()
    corpus: Source | None = None
    corpus_rows: Sequence[Item] = ()


class Ledgered(NamedTuple):
    """The items a probe sends, as recorded: the dev run in the exposure ledger (`run_id`; None for
    a public corpus, which is already public), the ids of the items (`item_ids`), and a reference
    test's dev run of the reference model (`reference_run_id`)."""

    run_id: int | None
    item_ids: list[int]
    reference_run_id: int | None = None


def prepare_probe(*, engine: Engine, data: ProbeCreate, actor: str, terms_max_age_days: int, environ: Mapping[str, str] | None = None) -> PreparedProbe:
    """Choose, gate, record and cut the items of a probe, and write the probe `queued`, in one unit
    of work committed before this returns. Nothing is sent yet. `terms_max_age_days`: how recently
    a `no` endpoint's terms must have been checked. Raises ProblemError: 404 (eval, release, corpus,
    model, endpoint), 422 (no cutoff, the endpoint serves another model, too few items on a side of
    the cutoff), 403 (the endpoint is augmented, `condition` augmented_endpoint; or its terms fail
    the gate; `condition` names which: each refusal audited, `service.evals.refusal_audit`); and
    SealedItemRefused (409) when a sealed item reached the plan."""
    environ = os.environ if environ is None else environ
    with refusals_audited(engine), write_transaction(engine) as session:
        model, endpoint = require_serving_endpoint(session=session, model=data.model, endpoint=data.endpoint)
        if endpoint.augmented:
            raise _refuse_augmented(endpoint, actor)
        asked = require_reference(session, data)
        test = choose_test(data.test, endpoint, asked)
        reference = asked if test is ProbeTest.REFERENCE_LOGPROB else None
        if reference is not None and reference.endpoint.id == endpoint.id:
            raise ProblemError(422, "Test not available", "the reference endpoint is the probed endpoint: a reference is another model's endpoint", reason=REASON)
        if reference is not None and reference.endpoint.augmented:
            raise _refuse_augmented(reference.endpoint, actor)
        key = key_source(data, endpoint.name, environ)
        cutoff = require_cutoff(model)
        target = _target(session, data, [endpoint] + ([reference.endpoint] if reference else []), cutoff=cutoff, actor=actor, terms_max_age_days=terms_max_age_days)
        plan = _plan(target.items, data, target.dataset, target.split, cutoff, test)
        probe_id = _record_probe(session, data, target, plan, model=model, endpoint=endpoint, reference=reference, test=test, actor=actor, api_key_from=key.api_key_from)
        prepared_reference = _prepared_reference(data, reference, environ)
    return PreparedProbe(
        probe_id=probe_id,
        plan=plan,
        endpoint=_probe_endpoint(data, endpoint, data.remote_model or model.name, key.api_key),
        model=model.name,
        cutoff=cutoff,
        data=data,
        api_key_from=key.api_key_from,
        key_variable=key.variable,
        test=test,
        endpoint_name=endpoint.name,
        logprobs=LogprobSupport(endpoint.logprobs),
        reference=prepared_reference,
    )


def _prepared_reference(data: ProbeCreate, reference: ReferenceEndpoint | None, environ: Mapping[str, str]) -> PreparedReference | None:
    """Where the reference test's requests go, with the reference's key (`reference_api_key`, else
    its endpoint's variable)."""
    if reference is None:
        return None
    key = key_source(data, reference.endpoint.name, environ, given=data.reference_api_key)
    endpoint = _probe_endpoint(data, reference.endpoint, reference.model.name, key.api_key)
    return PreparedReference(endpoint=endpoint, name=reference.endpoint.name, model=reference.model.name, logprobs=LogprobSupport(reference.endpoint.logprobs))


def _refuse_augmented(endpoint: Endpoint, actor: str) -> AuditedRefusal:
    """The 403 for a probe of an augmented endpoint, with its audit event: a model that can
    retrieve or search may complete an item's text because it found it, not because it was trained
    on it."""
    which = ", ".join(endpoint.augmentations) or "retrieval, web search or tools"
    details = {"condition": AUGMENTED_CONDITION, "endpoint": endpoint.name, "augmentations": endpoint.augmentations}
    event = AuditEvent(actor=actor, action=AuditAction.PROBE_REFUSED, object_type="endpoint", object_id=endpoint.name, count=0, details=details)
    problem = ProblemError(
        403,
        "Probe refused",
        f"endpoint {endpoint.name!r} is augmented ({which}): a completion probe needs the bare model, since a model that can look an item up "
        "completes it without having been trained on it; probe an endpoint serving the model without them, or, if this one has none, "
        f"record that with PATCH /v1/endpoints/{endpoint.name} {{\"augmented\": false}}; nothing was sent",
        condition=AUGMENTED_CONDITION,
    )
    return AuditedRefusal(event, problem)


def _target(session: Session, data: ProbeCreate, endpoints: Sequence[Endpoint], *, cutoff: date, actor: str, terms_max_age_days: int) -> ProbeTarget:
    """The eval's release or the corpus the request names, with the items to probe (sampled
    around `cutoff`, at most `data.limit`). For an eval, the terms of every endpoint the items go
    to (the probed one, and a reference test's reference) pass the gate first unless the request
    allows exposure (`_gate_terms`)."""
    if data.eval is None:
        assert data.corpus is not None
        corpus = require_corpus(session=session, name=data.corpus)
        corpus_rows, items = corpus_probe_items(session=session, corpus=corpus, cutoff=cutoff, limit=data.limit)
        return ProbeTarget(items, data.dataset_name or corpus.name, data.split_name or "test", corpus=corpus, corpus_rows=corpus_rows)
    evaluation = require_eval(session=session, name=data.eval)
    release = resolve_release(session=session, evaluation=evaluation, ref=str(data.release))
    if not data.allow_exposure:
        for endpoint in endpoints:
            _gate_terms(evaluation, endpoint, actor=actor, terms_max_age_days=terms_max_age_days)
    rows, items = eval_probe_items(session=session, release=release, cutoff=cutoff, limit=data.limit)
    return ProbeTarget(items, data.dataset_name or evaluation.name, data.split_name or Split.DEV.value, evaluation=evaluation, release=release, release_rows=rows)


def _gate_terms(evaluation: Eval, endpoint: Endpoint, *, actor: str, terms_max_age_days: int) -> None:
    """Refuse (403, audited: `AuditedRefusal`) an endpoint whose terms fail the gate's terms
    conditions (`curation.runs.gate.judge_terms`), naming the failing `condition`."""
    decision = judge_terms(
        endpoint=endpoint.name, trains_on_inputs=endpoint.trains_on_inputs, terms_checked_at=endpoint.terms_checked_at, now=utcnow(), terms_max_age_days=terms_max_age_days
    )
    if decision.allowed:
        return
    assert decision.condition is not None
    condition = decision.condition.value
    details = {"condition": condition, "endpoint": endpoint.name, "trains_on_inputs": endpoint.trains_on_inputs}
    event = AuditEvent(actor=actor, action=AuditAction.PROBE_REFUSED, object_type="eval", object_id=evaluation.name, count=0, details=details)
    problem = ProblemError(
        403,
        "Probe refused",
        f"{decision.detail}; or, accepting that every probed item is then marked exposed and leaves the eval at its next refresh, send allow_exposure: true",
        condition=condition,
    )
    raise AuditedRefusal(event, problem)


def _plan(items: list[ProbeItem], data: ProbeCreate, dataset: str, split: str, cutoff: date, test: ProbeTest) -> ProbePlan | MembershipPlan:
    """For the completion test, cut the items and build their prompts (`plan_probes`); for the
    log-probability tests, the texts to score (`plan_membership`). Either raises SealedItemRefused
    (409) should a sealed item be among them; 422 when either side of the cutoff has too few items
    to compare."""
    plan: ProbePlan | MembershipPlan
    if test is ProbeTest.COMPLETION:
        plan = plan_probes(items, dataset=dataset, split=split, policy=data.cut_policy)
        sent, not_cut = [prompt.item_id for prompt in plan.prompts], len(plan.not_cut)
    else:
        plan = plan_membership(items, dataset=dataset, split=split)
        sent, not_cut = list(plan.texts), 0
    instant = cutoff_instant(cutoff)
    before = sum(1 for item_id in sent if plan.items[item_id].occurred_at < instant)
    after = len(sent) - before
    if before < MIN_PRE_CUTOFF_ITEMS or after < MIN_CONTROL_ITEMS:
        raise ProblemError(
            422,
            "Too few items",
            f"{before} items to probe are dated before the model's training cutoff ({cutoff.isoformat()}) and {after} on or after it; "
            f"the probe compares the two and needs at least {MIN_PRE_CUTOFF_ITEMS} before and {MIN_CONTROL_ITEMS} after ({MIN_BAND} or more each to be useful); nothing was sent",
            before=before,
            after=after,
            not_cut=not_cut,
            reason="too_few_items",
        )
    return plan


def _ledger(
    session: Session, target: ProbeTarget, plan: ProbePlan | MembershipPlan, *, model: Model, endpoint: Endpoint, reference: ReferenceEndpoint | None, actor: str
) -> Ledgered:
    """Record the items the plan sends: for an eval, as a dev run in the exposure ledger
    (`curation.runs.ledger.record_run`: marked exposed when the endpoint may train on inputs), and
    as a dev run of the reference model through its endpoint when a reference test sends them there too."""
    sent = {prompt.item_id for prompt in plan.prompts} if isinstance(plan, ProbePlan) else set(plan.texts)
    if target.evaluation is None or target.release is None:
        return Ledgered(None, [item.id for item in target.corpus_rows if item.external_id in sent and item.id is not None])
    chosen = [row for row in target.release_rows if str(row.item_id) in sent]
    now = utcnow()
    run = record_run(session, evaluation=target.evaluation, release=target.release, model=model, endpoint=endpoint, split=Split.DEV, items=chosen, actor=actor, now=now)
    reference_run = None
    if reference is not None:
        reference_run = record_run(
            session, evaluation=target.evaluation, release=target.release, model=reference.model, endpoint=reference.endpoint, split=Split.DEV, items=chosen, actor=actor, now=now
        )
    return Ledgered(run.id, [row.item_id for row in chosen], reference_run.id if reference_run is not None else None)


def _record_probe(
    session: Session,
    data: ProbeCreate,
    target: ProbeTarget,
    plan: ProbePlan | MembershipPlan,
    *,
    model: Model,
    endpoint: Endpoint,
    reference: ReferenceEndpoint | None,
    test: ProbeTest,
    actor: str,
    api_key_from: ApiKeyFrom,
) -> int:
    """Write the probe `queued`, its items ledgered first (`_ledger`), and audit its start, in the
    caller's unit of work; returns its id."""
    ledgered = _ledger(session, target, plan, model=model, endpoint=endpoint, reference=reference, actor=actor)
    assert model.id is not None and endpoint.id is not None
    settings = data.model_dump(mode="json", exclude={"api_key", "reference_api_key", "eval", "corpus", "model", "endpoint", "release", "reference_endpoint", "reference_model"})
    probe = Probe(
        eval_id=target.evaluation.id if target.evaluation else None,
        release_id=target.release.id if target.release else None,
        source_id=target.corpus.id if target.corpus else None,
        model_id=model.id,
        endpoint_id=endpoint.id,
        run_id=ledgered.run_id,
        test=test.value,
        reference_model_id=reference.model.id if reference is not None else None,
        reference_endpoint_id=reference.endpoint.id if reference is not None else None,
        reference_run_id=ledgered.reference_run_id,
        dataset=target.dataset,
        split=target.split,
        settings={**settings, "api_key_from": api_key_from},
        item_ids=ledgered.item_ids,
        total=len(plan.prompts) if isinstance(plan, ProbePlan) else len(plan.texts) * (2 if reference is not None else 1),
        actor=actor,
        heartbeat_at=utcnow(),
    )
    session.add(probe)
    session.flush()
    assert probe.id is not None
    where = {"eval": target.evaluation.name, "release": target.release.number} if target.evaluation and target.release else {"corpus": data.corpus}
    details = {**where, "endpoint": endpoint.name, "run_id": ledgered.run_id, "test": test.value}
    if reference is not None:
        details |= {"reference_endpoint": reference.endpoint.name, "reference_run_id": ledgered.reference_run_id}
    session.add(AuditEvent(actor=actor, action=AuditAction.PROBE_START, object_type="probe", object_id=str(probe.id), count=len(ledgered.item_ids), details=details))
    return probe.id


def _probe_endpoint(data: ProbeCreate, endpoint: Endpoint, remote_model: str, api_key: SecretStr | None) -> ProbeEndpoint:
    """Where and how the probe's requests go: the endpoint's URL, the model name it expects
    (`remote_model`), the key, and the request's limits."""
    return ProbeEndpoint(
        base_url=endpoint.base_url,
        model=remote_model,
        api_key=api_key,
        concurrency=data.concurrency,
        timeout_seconds=data.timeout_seconds,
        max_attempts=data.max_attempts,
    )


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
    reference_model = session.get(Model, probe.reference_model_id) if probe.reference_model_id else None
    reference_endpoint = session.get(Endpoint, probe.reference_endpoint_id) if probe.reference_endpoint_id else None
    names |= {"reference_model": reference_model.name if reference_model else None, "reference_endpoint": reference_endpoint.name if reference_endpoint else None}
    runs = [run for run_id in (probe.run_id, probe.reference_run_id) if run_id and (run := session.get(Run, run_id)) is not None]
    status, error = ProbeStatus(probe.status), probe.error
    beat = probe.heartbeat_at or probe.created_at
    if status in (ProbeStatus.QUEUED, ProbeStatus.RUNNING) and (now or utcnow()) - beat > STALE_AFTER:
        status, error = ProbeStatus.FAILED, f"no progress since {beat:%Y-%m-%d %H:%M} UTC: the process running it stopped; start the probe again"
    report = ProbeReport.model_validate(probe.report) if probe.report is not None and status is ProbeStatus.DONE else None
    return read_model(
        ProbeRead, probe, **names, model=model.name, endpoint=endpoint.name, status=status, error=error, exposes_items=any(run.exposes_items for run in runs), report=report
    )


def list_probes(*, session: Session, limit: int = 100) -> list[ProbeRead]:
    """Probes, newest first."""
    return [probe_read(session, probe) for probe in session.exec(select(Probe).order_by(col(Probe.id).desc()).limit(limit)).all()]
