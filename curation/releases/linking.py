"""The linking core and the composition a release records: what the release before offers the
rotation (its dev split and its shares, `previous_basis`), and what the new release records of
both (`composition_record`, `linking_record`; `schemas.release.ReleaseComposition` and
`LinkingCore`). The rules themselves are `curation.releases.rotation`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from curation.releases.composition import Shares, Strata, released_strata, shares, summary
from curation.releases.rotation import LinkingReport
from schemas.evals import Eval, Split
from schemas.release import Release, ReleaseItem


@dataclass(frozen=True)
class Basis:
    """The release before a new one (`release`, None for a first release): the item ids of its dev
    split (`dev`) and its shares by dimension (`reference`, None when the eval does not balance or
    there is no release before)."""

    release: Release | None
    dev: frozenset[int]
    reference: Shares | None


def previous_basis(session: Session, *, evaluation: Eval) -> Basis:
    """The eval's newest release in force, as the next release's rotation uses it: its dev split and,
    when the eval balances its composition, its shares (each item's strata from its frozen content,
    its age at that release's period start)."""
    query = select(Release).where(Release.eval_id == evaluation.id, col(Release.withdrawn_at).is_(None))
    previous = session.exec(query.order_by(col(Release.number).desc()).limit(1)).first()
    if previous is None:
        return Basis(release=None, dev=frozenset(), reference=None)
    rows = session.exec(select(ReleaseItem.item_id, ReleaseItem.split, ReleaseItem.content).where(ReleaseItem.release_id == previous.id)).all()
    dev = frozenset(item_id for item_id, split, _ in rows if split == Split.DEV.value)
    reference = shares(released_strata(content, previous.period_start) for _, _, content in rows) if evaluation.balance_composition and rows else None
    return Basis(release=previous, dev=dev, reference=reference)


def composition_record(strata: Mapping[int, Strata], splits: Mapping[int, str], *, basis: Basis, balanced: bool) -> dict[str, Any]:
    """What a release of the members `strata` (item id -> strata) with `splits` records of its
    composition; categories are named only where a dev member carries them."""
    dev_tags = {entry.tag for item_id, entry in strata.items() if splits[item_id] == Split.DEV.value}
    record = summary([strata[item_id] for item_id in sorted(strata)], named_tags=dev_tags)
    record["balanced_against"] = basis.release.number if balanced and basis.release is not None else None
    return record


def linking_record(report: LinkingReport, splits: Mapping[int, str], *, share: float, basis: Basis) -> dict[str, Any]:
    """What a release with `splits` (item id -> split) records of its linking core: the counts are
    taken from the splits written, the reasons from the rotation's `report`."""
    dev = [item_id for item_id, split in splits.items() if split == Split.DEV.value]
    carried = sum(item_id in basis.dev for item_id in dev)
    wanted = math.ceil(share * len(dev) - 1e-9) if basis.release is not None else 0
    return {
        "share": share,
        "previous_release": basis.release.number if basis.release is not None else None,
        "previous_dev": len(basis.dev),
        "dev": len(dev),
        "carried": carried,
        "carried_share": round(carried / len(dev), 4) if dev else 0.0,
        "wanted": wanted,
        "could_not_keep": max(0, wanted - carried),
        "left_by_rule": dict(report.left),
    }
