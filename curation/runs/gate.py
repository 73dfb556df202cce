"""The gate in front of model runs: may a run send its items to an endpoint, and does doing so
expose them?

Pure functions of the facts (scopes, the endpoint's terms, the clock, the sealed-read budget): the
service gathers them and turns a refusal into a 403 that names the failing condition.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from schemas.model_registry import TrainsOnInputs


class GateCondition(StrEnum):
    """Why a sealed run is refused, in the order the conditions are checked."""

    SEALED_SCOPE = "sealed_scope"
    TRAINS_ON_INPUTS = "trains_on_inputs"
    TERMS_UNKNOWN = "terms_unknown"
    TERMS_UNCHECKED = "terms_unchecked"
    TERMS_STALE = "terms_stale"
    SEALED_BUDGET = "sealed_budget"


@dataclass(frozen=True)
class SealedRunRequest:
    """What the gate judges a sealed run on. `terms_checked_at` and `now` are tz-aware."""

    has_sealed_scope: bool
    endpoint: str
    trains_on_inputs: str
    terms_checked_at: datetime | None
    now: datetime
    terms_max_age_days: int
    budget: int
    used: int


@dataclass(frozen=True)
class GateDecision:
    """`allowed`, or the first failing `condition` with a `detail` a person can act on."""

    allowed: bool
    condition: GateCondition | None = None
    detail: str = ""


def exposes(trains_on_inputs: str) -> bool:
    """True when items sent to an endpoint with these terms must be treated as exposed: the
    provider trains on inputs, or nobody knows whether it does."""
    if trains_on_inputs not in tuple(TrainsOnInputs):
        raise ValueError(f"trains_on_inputs must be yes, no or unknown, not {trains_on_inputs!r}")
    return trains_on_inputs != TrainsOnInputs.NO


def judge_terms(*, endpoint: str, trains_on_inputs: str, terms_checked_at: datetime | None, now: datetime, terms_max_age_days: int) -> GateDecision:
    """Whether an endpoint's terms let sealed items go there: it does not train on inputs, and its
    terms were checked within `terms_max_age_days` of `now` (a check dated in the future counts
    as stale: the record is wrong). Otherwise the first failing condition."""
    if now.tzinfo is None or (terms_checked_at is not None and terms_checked_at.tzinfo is None):
        raise ValueError("the gate compares tz-aware datetimes only")
    name = endpoint
    if trains_on_inputs == TrainsOnInputs.YES:
        return GateDecision(
            False, GateCondition.TRAINS_ON_INPUTS, f"endpoint {name!r} trains on its inputs: sealed items never go there; use an endpoint whose terms say it does not"
        )
    if trains_on_inputs != TrainsOnInputs.NO:
        return GateDecision(
            False,
            GateCondition.TERMS_UNKNOWN,
            f"the data-retention terms of endpoint {name!r} are unknown: check whether it trains on inputs and record it (PATCH /v1/endpoints/{name})",
        )
    if terms_checked_at is None:
        return GateDecision(False, GateCondition.TERMS_UNCHECKED, f"the terms of endpoint {name!r} were never checked: record when (PATCH /v1/endpoints/{name})")
    age = now - terms_checked_at
    if age > timedelta(days=terms_max_age_days) or age < timedelta(0):
        checked = terms_checked_at.date().isoformat()
        return GateDecision(
            False,
            GateCondition.TERMS_STALE,
            f"the terms of endpoint {name!r} were last checked on {checked}, more than {terms_max_age_days} days ago (or in the future): "
            f"check them again and record it (PATCH /v1/endpoints/{name})",
        )
    return GateDecision(True)


def judge_sealed_run(request: SealedRunRequest) -> GateDecision:
    """Allow a sealed run only with the `sealed` scope, to an endpoint whose terms pass
    `judge_terms`, while the release's sealed-read budget has room. Otherwise the first failing
    condition, in `GateCondition` order."""
    if not request.has_sealed_scope:
        return GateDecision(False, GateCondition.SEALED_SCOPE, "a sealed run needs a token with the 'sealed' scope")
    terms = judge_terms(
        endpoint=request.endpoint,
        trains_on_inputs=request.trains_on_inputs,
        terms_checked_at=request.terms_checked_at,
        now=request.now,
        terms_max_age_days=request.terms_max_age_days,
    )
    if not terms.allowed:
        return terms
    if request.used >= request.budget:
        return GateDecision(
            False,
            GateCondition.SEALED_BUDGET,
            f"the release's sealed-read budget is spent ({request.used} of {request.budget} used): sealed items are for final decisions; wait for the next release",
        )
    return GateDecision(True)
