"""Exposure reports from the ledger: every run that served an item, and per release of an eval,
which endpoints saw what share of it under which terms."""

from __future__ import annotations

from sqlalchemy import case, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from schemas.evals import Eval, Split
from schemas.item import Item
from schemas.model_registry import Endpoint, Model
from schemas.release import Release, ReleaseItem
from schemas.runs import EndpointShare, EvalExposure, ExposureRead, ItemExposures, ReleaseExposure, Run, RunItem


def item_exposures(*, session: Session, item: Item) -> ItemExposures:
    """Every run that served the item, oldest first, with the terms it went out under."""
    item_id = item.id
    assert item_id is not None
    rows = session.execute(
        sa_select(RunItem, Run, col(Eval.name), col(Release.number), col(Endpoint.name), col(Model.name))
        .join(Run, col(Run.id) == col(RunItem.run_id))
        .join(Eval, col(Eval.id) == col(Run.eval_id))
        .join(Release, col(Release.id) == col(RunItem.release_id))
        .join(Endpoint, col(Endpoint.id) == col(RunItem.endpoint_id))
        .join(Model, col(Model.id) == col(Run.model_id))
        .where(col(RunItem.item_id) == item_id)
        .order_by(col(RunItem.id))
    ).all()
    exposures = [
        ExposureRead(
            run_id=run.id or 0,
            eval=eval_name,
            release=number,
            split=entry.split,
            endpoint=endpoint_name,
            model=model_name,
            trains_on_inputs=run.trains_on_inputs,
            exposes_items=run.exposes_items,
            at=entry.at,
            actor=run.actor,
        )
        for entry, run, eval_name, number, endpoint_name, model_name in rows
    ]
    return ItemExposures(item_id=item_id, exposed_at=item.exposed_at, exposed_reason=item.exposed_reason, exposures=exposures)


def eval_exposure(*, session: Session, evaluation: Eval) -> EvalExposure:
    """Per release (oldest first): its size, how many of its items are marked exposed, and per
    endpoint that served any of it: runs, distinct items (sealed among them), share of the release."""
    releases = session.exec(select(Release).where(Release.eval_id == evaluation.id).order_by(col(Release.number))).all()
    reports: list[ReleaseExposure] = []
    for release in releases:
        total = release.dev_count + release.sealed_count
        exposed = session.exec(
            select(func.count())
            .select_from(ReleaseItem)
            .join(Item, col(Item.id) == col(ReleaseItem.item_id))
            .where(ReleaseItem.release_id == release.id, col(Item.exposed_at).is_not(None))
        ).one()
        seen = session.execute(
            sa_select(
                Endpoint,
                col(Model.name),
                func.count(func.distinct(RunItem.run_id)),
                func.count(func.distinct(RunItem.item_id)),
                func.count(func.distinct(case((col(RunItem.split) == Split.SEALED.value, col(RunItem.item_id))))),
            )
            .join(Endpoint, col(Endpoint.id) == col(RunItem.endpoint_id))
            .join(Model, col(Model.id) == col(Endpoint.model_id))
            .where(col(RunItem.release_id) == release.id)
            .group_by(col(Endpoint.id), col(Model.name))
            .order_by(col(Endpoint.name))
        ).all()
        shares = [
            EndpointShare(
                endpoint=endpoint.name,
                provider=endpoint.provider,
                model=model_name,
                trains_on_inputs=endpoint.trains_on_inputs,
                terms_checked_at=endpoint.terms_checked_at,
                runs=runs,
                items=items,
                sealed_items=sealed,
                share=round(items / total, 4) if total else 0.0,
            )
            for endpoint, model_name, runs, items, sealed in seen
        ]
        reports.append(ReleaseExposure(release=release.number, items=total, exposed_items=int(exposed), endpoints=shares))
    return EvalExposure(eval=evaluation.name, releases=reports)
