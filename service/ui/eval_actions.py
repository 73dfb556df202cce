"""Creating an eval and refreshing one from the browser (admin): `/ui/evals/new` and the
"Refresh now" button of an eval's releases page.

The form is read into `EvalCreate`, the model `POST /v1/evals` and eval files are read into, so a
page refuses exactly what the API and `goldenset eval create` refuse (unknown sources, a schedule
that is no cron expression, values out of range), naming the field; the form comes back as typed.
A new eval's first release waits for its schedule or for "Refresh now". A refresh runs on
connections of its own (`service.evals.refresh.refresh_eval`), as the API's does, and says which
release it wrote or found.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError
from sqlmodel import Session

from schemas.evals import DEFAULT_LINKING_SHARE, DEFAULT_SCHEDULE, DEFAULT_SEALED_FRACTION, DEFAULT_SEALED_READ_BUDGET, ApprovalPolicy, EvalCreate, ReviewAssignment
from schemas.token import Scope
from service.core.deps import WriteSessionDep
from service.core.problems import ProblemError
from service.evals.definitions import create_eval, require_eval
from service.evals.refresh import FuturePeriod, RefreshBusy, RefreshError, refresh_eval
from service.sources.definitions import list_sources
from service.ui.pages import done, field_errors, need, page, secret_key, ui_router
from service.ui.refusals import Refusal, shows_refusal
from service.ui.team import team_values

TEAM_FIELDS = ("reviewers_per_item", "agreement_sample", "review_assignment", "reviewers", "adjudicators", "review_guidelines")

router = ui_router()

FORM_DEFAULTS = {
    "name": "",
    "description": "",
    "sources": [],
    "target_size": "200",
    "schedule": DEFAULT_SCHEDULE,
    "max_age_days": "365",
    "sealed_fraction": f"{DEFAULT_SEALED_FRACTION:g}",
    "approval_policy": ApprovalPolicy.MANUAL.value,
    "sealed_read_budget": str(DEFAULT_SEALED_READ_BUDGET),
    "linking_share": f"{DEFAULT_LINKING_SHARE:g}",
    "balance_composition": "true",
    "reviewers_per_item": "1",
    "agreement_sample": "1",
    "review_assignment": ReviewAssignment.OPEN.value,
    "reviewers": "",
    "adjudicators": "",
    "review_guidelines": "",
}
"""What the form shows first: `EvalCreate`'s own defaults."""


def _form_page(request: Request, session: Session, typed: dict[str, Any], errors: dict[str, str], status: int = 200) -> HTMLResponse:
    sources = [source.name for source in list_sources(session=session)]
    context = {
        "typed": typed,
        "errors": errors,
        "sources": sources,
        "policies": [policy.value for policy in ApprovalPolicy],
        "assignments": [choice.value for choice in ReviewAssignment],
    }
    return page(request, "eval_new.html", context, status=status)


def eval_from_form(typed: dict[str, Any]) -> EvalCreate:
    """The eval the form asks for. Blank optional fields take `EvalCreate`'s defaults; a blank
    maximum age means no limit. Raises ValidationError naming each wrong field."""
    values: dict[str, Any] = {"name": typed["name"].strip(), "description": typed["description"].strip(), "sources": typed["sources"]}
    for field in ("target_size", "schedule", "sealed_fraction", "approval_policy", "sealed_read_budget", "linking_share", "balance_composition"):
        if str(typed[field]).strip():
            values[field] = str(typed[field]).strip()
    values["max_age_days"] = str(typed["max_age_days"]).strip() or None
    values |= team_values({field: str(typed[field]) for field in TEAM_FIELDS})
    return EvalCreate.model_validate(values)


@router.get("/ui/evals/new")
def new_eval_form(request: Request) -> HTMLResponse:
    need(request, Scope.ADMIN, "Creating an eval")
    with Session(request.app.state.engine) as session:
        return _form_page(request, session, dict(FORM_DEFAULTS), {})


@router.post("/ui/evals/new", response_model=None)
def create(
    request: Request,
    session: WriteSessionDep,
    name: Annotated[str, Form(max_length=200)] = "",
    description: Annotated[str, Form(max_length=4000)] = "",
    sources: Annotated[list[str] | None, Form()] = None,
    target_size: Annotated[str, Form(max_length=20)] = "",
    schedule: Annotated[str, Form(max_length=200)] = "",
    max_age_days: Annotated[str, Form(max_length=20)] = "",
    sealed_fraction: Annotated[str, Form(max_length=20)] = "",
    approval_policy: Annotated[str, Form(max_length=20)] = "",
    sealed_read_budget: Annotated[str, Form(max_length=20)] = "",
    linking_share: Annotated[str, Form(max_length=20)] = "",
    balance_composition: Annotated[str, Form(max_length=20)] = "",
    reviewers_per_item: Annotated[str, Form(max_length=20)] = "",
    agreement_sample: Annotated[str, Form(max_length=20)] = "",
    review_assignment: Annotated[str, Form(max_length=20)] = "",
    reviewers: Annotated[str, Form(max_length=8000)] = "",
    adjudicators: Annotated[str, Form(max_length=8000)] = "",
    review_guidelines: Annotated[str, Form(max_length=40_000)] = "",
) -> HTMLResponse | RedirectResponse:
    """Create the eval (admin) in the request's unit of work, audited with the person; a refused
    form shows again as typed, with each error beside its field."""
    who = need(request, Scope.ADMIN, "Creating an eval")
    typed: dict[str, Any] = {
        "name": name,
        "description": description,
        "sources": sources or [],
        "target_size": target_size,
        "schedule": schedule,
        "max_age_days": max_age_days,
        "sealed_fraction": sealed_fraction,
        "approval_policy": approval_policy,
        "sealed_read_budget": sealed_read_budget,
        "linking_share": linking_share,
        "balance_composition": balance_composition,
        "reviewers_per_item": reviewers_per_item,
        "agreement_sample": agreement_sample,
        "review_assignment": review_assignment,
        "reviewers": reviewers,
        "adjudicators": adjudicators,
        "review_guidelines": review_guidelines,
    }
    engine = request.app.state.engine

    def form_again(refusal: Refusal) -> HTMLResponse:
        with Session(engine) as fresh:
            return _form_page(request, fresh, typed, {"form": refusal.detail}, status=refusal.status)

    shows_refusal(request, form_again)
    try:
        data = eval_from_form(typed)
    except ValidationError as exc:
        errors = field_errors(exc)
        raise ProblemError(422, "Eval not created", "; ".join(f"{field.replace('_', ' ')}: {message}" for field, message in errors.items())) from exc
    evaluation = create_eval(session=session, data=data, secret_key=secret_key(request), actor=who.actor)
    return done(
        f"/ui/evals/{evaluation.name}/releases",
        f"Created eval {evaluation.name}. Its first release waits for its schedule ({evaluation.schedule}, UTC) or for Refresh now.",
    )


@router.post("/ui/evals/{name}/refresh")
def refresh_now(request: Request, name: str) -> RedirectResponse:
    """Write the release of the current period now (admin), or say which one it already has."""
    who = need(request, Scope.ADMIN, "Refreshing an eval")
    with Session(request.app.state.engine) as session:
        require_eval(session=session, name=name)
    try:
        outcome = refresh_eval(request.app.state.engine, name=name, at=None, secret_key=secret_key(request), actor=who.actor, wait_seconds=60)
    except (FuturePeriod, RefreshBusy, RefreshError) as exc:
        return done(f"/ui/evals/{name}/releases", f"Not refreshed: {exc}")
    release = outcome.release
    if not outcome.created:
        return done(f"/ui/evals/{name}/releases", f"Release {release.number} of {name} already covers this period; nothing new was written.")
    return done(
        f"/ui/evals/{name}/releases/{release.number}",
        f"Wrote release {release.number} of {name}: {release.dev_count} dev and {release.sealed_count} sealed items.",
    )
