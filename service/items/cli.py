"""`goldenset review` in the terminal: decisions and undos by id, or an interactive pass over the
review queue of an eval's sources (`service.items.review_cli`), then over the duplicates dedup
decided with a low margin, each beside the item it matched."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.dedup.stats import LOW_MARGIN
from curation.refusals import Refused
from curation.review import review_batch, undo_review
from curation.team_rounds import is_team_review
from schemas.common import MAX_ROW_ID, utcnow
from schemas.evals import Eval
from schemas.review import Decision, ReviewDecision, ReviewUndone
from schemas.team_review import MAX_CLAIM
from service.core.attempts import attempt
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.core.remote import remote_client
from service.core.terminal import CLI_ACTOR, EXIT_REJECTED, err, fail, open_engine, out
from service.items.edit_cli import item_app
from service.items.review_cli import describe_undone

if TYPE_CHECKING:
    pass


def decide_ids(engine: Engine, decisions: Sequence[ReviewDecision]) -> bool:
    """Apply decisions by id; print what was done and each refusal. False when any was refused."""
    with write_transaction(engine) as session:
        outcome = review_batch(session=session, decisions=decisions, actor=CLI_ACTOR, now=utcnow())
    if outcome.approved:
        out.print(f"approved: {', '.join(str(item_id) for item_id in outcome.approved)}")
    if outcome.rejected:
        out.print(f"rejected: {', '.join(str(item_id) for item_id in outcome.rejected)}")
    for error in outcome.errors:
        err.print(f"[yellow]item {escape(error.external_id or '')}[/]: {escape(error.detail)}", highlight=False)
    return not outcome.errors


def undo_ids(engine: Engine, item_ids: Sequence[int]) -> bool:
    """Undo the command line's newest decision on each item, each in a unit of work of its own
    (`service.core.attempts.attempt`); print what was undone and each refusal. False when any was
    refused."""
    refused = False
    for item_id in item_ids:
        undone = attempt(engine, partial(_undo, item_id=item_id))
        if isinstance(undone, Refused):
            err.print(f"[yellow]item {item_id} not undone ({undone.reason}):[/] {escape(undone.detail)}", highlight=False)
            refused = True
        else:
            out.print(describe_undone(undone), highlight=False)
    return not refused


def _undo(session: Session, *, item_id: int) -> ReviewUndone:
    return undo_review(session=session, item_id=item_id, actor=CLI_ACTOR, now=utcnow())


def _eval(engine: Engine, name: str) -> Eval:
    from service.evals.definitions import require_eval

    with Session(engine) as session:
        try:
            return require_eval(session=session, name=name)
        except ProblemError as exc:
            raise fail(escape(exc.detail or f"no eval {name!r}")) from exc


def _refuse_team_review(engine: Engine, name: str) -> None:
    """End the command (exit 2) when the eval `name` is reviewed by a team: its votes are each
    person's, cast with their own token over the API; the command line (`cli`) is nobody's."""
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == name)).first()
    if evaluation is not None and is_team_review(evaluation):
        raise fail(
            f"eval {escape(name)} is reviewed by a team: each person votes with their own token over the API, so run this with "
            "--url (or GOLDENSET_URL) and GOLDENSET_TOKEN set to your token"
        )


def review(
    eval_name: Annotated[str | None, typer.Option("--eval", help="Review the queue of this eval's sources.")] = None,
    source: Annotated[list[str] | None, typer.Option("--source", help="Review the queue of this source too (repeat).")] = None,
    approve: Annotated[list[int] | None, typer.Option("--approve", min=1, max=MAX_ROW_ID, help="Approve this item id (repeat); no prompts.")] = None,
    reject: Annotated[list[int] | None, typer.Option("--reject", min=1, max=MAX_ROW_ID, help="Reject this item id (repeat; needs --reason); no prompts.")] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why (required to reject).")] = "",
    undo: Annotated[
        list[int] | None,
        typer.Option("--undo", min=1, max=MAX_ROW_ID, help="Undo the newest approval or rejection the command line took of this item id (repeat); no prompts."),
    ] = None,
    limit: Annotated[int, typer.Option(help="Walk at most this many queued items, and as many low-margin duplicates.", min=1)] = 50,
    neighbours: Annotated[bool, typer.Option("--neighbours/--no-neighbours", help="Show each item's nearest curated items (never a sealed one's).")] = True,
    margin: Annotated[float, typer.Option("--margin", min=0, max=1, help="Then show duplicates decided with a margin under this (0: none).")] = LOW_MARGIN,
    sealed_view: Annotated[
        bool,
        typer.Option(
            "--sealed-view",
            help="Open (or use) the command line's sealed review window on --eval: sealed-bound items are shown in full, each read audited; "
            "opening it takes one unit of the eval's sealed-read budget (GOLDENSET_SEALED_RUN_READ_HOURS long).",
        ),
    ] = False,
    claim: Annotated[
        int | None,
        typer.Option("--claim", min=1, max=MAX_CLAIM, help="Team review over the API, on an eval shared by claims: first claim a batch of this many items to vote on."),
    ] = None,
    disputed: Annotated[
        bool, typer.Option("--disputed", help="Team review over the API: walk the eval's disagreements as its adjudicator (a/r and --approve/--reject decide).")
    ] = False,
) -> None:
    r"""Approve or reject the items dedup kept as unique, or undo a decision.

    With --undo, --approve or --reject, act on those ids without prompts (undos
    first: an undo takes back the newest approval or rejection the command line
    took of the item, which goes back to the review queue; once a release has
    acted on a decision, it stays).

    Otherwise walk the review queue of the eval's sources, oldest incident
    first: each item in full as "n of N", with its dedup decision and nearest
    curated neighbours. Sealed-bound items are shown by source, date, status and
    dedup decision only, unless --sealed-view opens an audited sealed review
    window on --eval, which takes one unit of its sealed-read budget. Then each
    duplicate decided with a low margin (closest call first) is shown beside the
    item it matched.

    Keys: \[a]pprove, \[r]eject (asks a reason), \[s]kip (Enter), \[b]ack,
    \[u]ndo (the newest decision of this pass; its item is shown again), \[q]uit.
    Close calls: \[k]eep as duplicate, \[n]ot a duplicate (asks a note), \[s]kip,
    \[q]uit. Any other key is named and asked again.

    Over the API (--url) it works the same on an eval's queue (--eval), as the token's owner.

    An eval reviewed by a team is reviewed over the API only, each person with
    their own token (--url and GOLDENSET_TOKEN). The pass walks what waits for
    your vote: \[a]pprove and \[r]eject cast your vote and say where the item's
    round stands (waiting for more votes, decided, or disputed: it goes to the
    adjudicator); \[u]ndo takes back your newest vote (or the decision it settled).
    --claim N first claims a batch on an eval shared by claims; --disputed walks
    the disagreements as the eval's adjudicator. With --eval, --approve and
    --reject cast votes (decide, with --disputed) and --undo takes votes back.

    Exit status: 0 when all were taken, 3 when some were refused, 2 on bad usage
    (and for an eval reviewed by a team on the database), 7 when the eval's
    sealed-read budget is spent."""
    with remote_client() as client:
        if client is not None:
            from service.items.remote_review import remote_review

            remote_review(
                client, eval_name=eval_name, approve=approve or [], reject=reject or [], undo=undo or [], reason=reason,
                limit=limit, neighbours=neighbours, margin=margin, sealed_view=sealed_view, claim=claim, disputed=disputed,
            )  # fmt: skip
            return
    from service.items.local_review import interactive_review, open_window  # loads the dedup index's modules

    engine = open_engine()
    if eval_name is not None:
        _refuse_team_review(engine, eval_name)
    if claim is not None or disputed:
        raise fail("--claim and --disputed are for an eval reviewed by a team, over the API: give --eval NAME with --url and GOLDENSET_TOKEN")
    if undo or approve or reject:
        done = undo_ids(engine, undo or [])
        decisions = [ReviewDecision(item_id=item_id, decision=Decision.APPROVE, reason=reason) for item_id in approve or []]
        decisions += [ReviewDecision(item_id=item_id, decision=Decision.REJECT, reason=reason) for item_id in reject or []]
        if decisions:
            done = decide_ids(engine, decisions) and done
        if not done:
            raise typer.Exit(EXIT_REJECTED)
        return
    if sealed_view and eval_name is None:
        raise fail("--sealed-view needs --eval NAME: a sealed review window is opened on one eval, and counted against its sealed-read budget")
    evaluation = _eval(engine, eval_name) if eval_name is not None else None
    sources = list(dict.fromkeys([*(evaluation.sources if evaluation is not None else []), *(source or [])]))
    if not sources:
        raise fail("name the items to review: --eval NAME or --source NAME, or act on ids with --approve/--reject/--undo")
    if sealed_view and evaluation is not None:
        open_window(engine, evaluation)
    interactive_review(engine, sources=sources, evaluation=evaluation, limit=limit, neighbours=neighbours, margin=margin, sealed_view=sealed_view)


def register(app: typer.Typer) -> None:
    """Add `review` and the `item` group (`service.items.edit_cli`) to the `goldenset` app."""
    app.command()(review)
    app.add_typer(item_app, name="item")
