"""The exposure ledger: writing a run, every item it sends to an endpoint, and what that exposes.

`record_run` writes the run with the endpoint's terms as they stand, one ledger row per item
served, the run's audit event and, for an endpoint that may train on its inputs
(`curation.runs.gate.exposes`), the exposure marks on its items: the next refresh of every eval
holding them retires them, while dedup keeps them in its history, so a later paraphrase of one is
a duplicate rather than a fresh item. Runs and completion probes both send items through it. It
flushes and never commits: the caller commits the run with whatever else its transaction holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import update
from sqlmodel import Session, col, select

from curation.runs.gate import exposes
from schemas.audit import AuditAction, AuditEvent
from schemas.evals import Eval, Split
from schemas.item import Item
from schemas.model_registry import Endpoint, Model
from schemas.release import Release, ReleaseItem
from schemas.runs import Run, RunItem

EXPOSED_REASON_LIMIT = 255


def record_run(
    session: Session,
    *,
    evaluation: Eval,
    release: Release,
    model: Model,
    endpoint: Endpoint,
    split: Split,
    items: Sequence[ReleaseItem],
    actor: str,
    token_id: int | None = None,
    occurred_after: datetime | None = None,
    idempotency_key: str | None = None,
    now: datetime,
) -> Run:
    """Write a run of `model` through `endpoint` on `items` of the release's `split` at `now`, in
    the order given, with its ledger rows, audit event and exposure marks; flushed, not committed.
    `token_id`: the token starting it (None: the command line), whose run it is."""
    assert evaluation.id is not None and release.id is not None and model.id is not None and endpoint.id is not None
    exposing = exposes(endpoint.trains_on_inputs)
    run = Run(
        eval_id=evaluation.id,
        release_id=release.id,
        model_id=model.id,
        endpoint_id=endpoint.id,
        split=split.value,
        actor=actor,
        token_id=token_id,
        idempotency_key=idempotency_key,
        occurred_after=occurred_after,
        item_count=len(items),
        trains_on_inputs=endpoint.trains_on_inputs,
        terms_checked_at=endpoint.terms_checked_at,
        exposes_items=exposing,
        augmented=endpoint.augmented,
        created_at=now,
    )
    session.add(run)
    session.flush()
    assert run.id is not None
    session.add_all(
        RunItem(
            run_id=run.id,
            item_id=row.item_id,
            endpoint_id=endpoint.id,
            release_id=release.id,
            split=row.split,
            occurred_at=row.occurred_at,
            content_digest=row.content_digest,
            at=now,
        )
        for row in items
    )
    ids = [row.item_id for row in items]
    details = {"run_id": run.id, "release": release.number, "split": split.value, "endpoint": endpoint.name, "model": model.name, "trains_on_inputs": endpoint.trains_on_inputs}
    action = AuditAction.RUN_SEALED_START if split is Split.SEALED else AuditAction.RUN_START
    session.add(AuditEvent(actor=actor, action=action, object_type="run", object_id=str(run.id), count=len(ids), details={**details, "item_ids": ids}, at=now))
    if exposing and ids:
        reason = f"sent to endpoint {endpoint.name} (trains on inputs: {endpoint.trains_on_inputs}) by run {run.id}"
        newly = list(session.exec(select(Item.id).where(col(Item.id).in_(ids), col(Item.exposed_at).is_(None))).all())
        if newly:
            session.exec(update(Item).where(col(Item.id).in_(newly)).values(exposed_at=now, exposed_reason=reason[:EXPOSED_REASON_LIMIT]))
            session.add(
                AuditEvent(
                    actor=actor, action=AuditAction.ITEM_EXPOSED, object_type="run", object_id=str(run.id), count=len(newly), details={**details, "item_ids": sorted(newly)}, at=now
                )
            )
    session.flush()
    return run
