"""An eval's review team, `/ui/evals/{name}/team`: its settings (reviewers per item, agreement
sample, how the queue is shared, who reviews and who adjudicates, the guidelines shown beside every
item), each person's progress, and how often the votes agreed (percent agreement and Fleiss'
kappa). Reading needs `curate`; changing the settings `admin`, through `EvalUpdate` and
`update_eval`, as `PATCH /v1/evals/{name}` does, audited with the person.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError
from sqlmodel import Session

from curation.team_progress import team_review
from schemas.common import utcnow
from schemas.evals import Eval, EvalUpdate, ReviewAssignment
from schemas.token import Scope
from service.core.deps import WriteSessionDep
from service.core.problems import ProblemError
from service.evals.definitions import require_eval, update_eval
from service.evals.team_views import view_counts
from service.ui.pages import UiRefused, done, field_errors, need, page, ui_router
from service.ui.refusals import Refusal, shows_refusal

router = ui_router()
LIST_FIELDS = ("reviewers", "adjudicators")


def names(text: str) -> list[str]:
    """People named in a form field: separated by commas, spaces or lines, each once, in order."""
    found: list[str] = []
    for part in text.replace(",", " ").split():
        if part not in found:
            found.append(part)
    return found


def team_form(evaluation: Eval) -> dict[str, str]:
    """The settings form as the eval has them."""
    return {
        "reviewers_per_item": str(evaluation.reviewers_per_item),
        "agreement_sample": f"{evaluation.agreement_sample:g}",
        "review_assignment": evaluation.review_assignment,
        "reviewers": ", ".join(evaluation.reviewers),
        "adjudicators": ", ".join(evaluation.adjudicators),
        "review_guidelines": evaluation.review_guidelines,
    }


def team_values(typed: dict[str, str]) -> dict[str, Any]:
    """The team settings a form asks for, as `EvalCreate` and `EvalUpdate` take them (blank numbers
    are left out, so they keep their defaults or current values)."""
    values: dict[str, Any] = {field: names(typed[field]) for field in LIST_FIELDS}
    for field in ("reviewers_per_item", "agreement_sample", "review_assignment"):
        if typed[field].strip():
            values[field] = typed[field].strip()
    values["review_guidelines"] = typed["review_guidelines"].replace("\r\n", "\n").strip()
    return values


def _team_page(request: Request, session: Session, evaluation: Eval, form: dict[str, str], errors: dict[str, str], status: int = 200) -> HTMLResponse:
    who = need(request, Scope.CURATE, "The review team page")
    now = utcnow()
    counts = view_counts(session, evaluation, actor=who.actor, now=now)
    progress = team_review(session=session, evaluation=evaluation, waiting_for_votes=counts.mine, disputed=counts.disputed, now=now)
    context = {"evaluation": evaluation, "progress": progress, "form": form, "errors": errors, "assignments": [choice.value for choice in ReviewAssignment]}
    return page(request, "team.html", context, status=status)


def _eval(session: Session, name: str) -> Eval:
    try:
        return require_eval(session=session, name=name)
    except ProblemError as exc:
        raise UiRefused(404, "No such eval", exc.detail) from exc


@router.get("/ui/evals/{name}/team")
def team_page(request: Request, name: str) -> HTMLResponse:
    need(request, Scope.CURATE, "The review team page")
    with Session(request.app.state.engine) as session:
        evaluation = _eval(session, name)
        return _team_page(request, session, evaluation, team_form(evaluation), {})


@router.post("/ui/evals/{name}/team", response_model=None)
def change_team(
    request: Request,
    name: str,
    session: WriteSessionDep,
    reviewers_per_item: Annotated[str, Form(max_length=20)] = "",
    agreement_sample: Annotated[str, Form(max_length=20)] = "",
    review_assignment: Annotated[str, Form(max_length=20)] = "",
    reviewers: Annotated[str, Form(max_length=8000)] = "",
    adjudicators: Annotated[str, Form(max_length=8000)] = "",
    review_guidelines: Annotated[str, Form(max_length=40_000)] = "",
) -> HTMLResponse | RedirectResponse:
    """Save the eval's team settings (admin), audited; refused settings show the form again as typed."""
    who = need(request, Scope.ADMIN, "Changing an eval's review team")
    typed = {
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
            return _team_page(request, fresh, _eval(fresh, name), typed, {"form": refusal.detail}, status=refusal.status)

    shows_refusal(request, form_again)
    evaluation = _eval(session, name)
    try:
        update = EvalUpdate.model_validate(team_values(typed))
    except ValidationError as exc:
        errors = field_errors(exc)
        raise ProblemError(422, "Team not saved", "; ".join(f"{field.replace('_', ' ')}: {message}" for field, message in errors.items())) from exc
    update_eval(session=session, evaluation=evaluation, data=update, actor=who.actor)
    return done(f"/ui/evals/{name}/team", f"Review team of {name} saved: it applies to the next vote.")
