"""`goldenset review` over the API (`--url`): the same interactive pass as on the database
(`service.items.review_cli`), with the queue, neighbours, decisions, undos and low-margin rulings
asked of the service through `goldenset_client`; and decisions and undos by id. On an eval reviewed
by a team, decisions are the token's votes, or its adjudications of the disagreements
(`service.items.team_review_cli`).

What the service withholds stays withheld: sealed-bound entries come by metadata only unless the
token holds a sealed review window (`--sealed-view` opens one, taking a unit of the eval's
sealed-read budget), and the service never returns a sealed neighbour."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.panel import Panel

from schemas.dedup import LowMarginDuplicate
from schemas.review import Decision, ReviewQueuePage, ReviewUndone
from service.core.terminal import EXIT_REJECTED, err, fail, out
from service.items.review_cli import Neighbour, Shown, describe_undone, item_panel, review_pass

if TYPE_CHECKING:
    from goldenset_client import Client

    from service.items.team_review_cli import TeamEval


@dataclass
class RemoteDesk:
    """The review's reads and writes through the API, as the token's owner."""

    client: Client
    with_neighbours: bool

    def neighbours(self, item_id: int, count: int) -> list[Neighbour] | None:
        if not self.with_neighbours:
            return None
        from goldenset_client import Conflict

        try:
            found = self.client.similar(item_id, k=count)
        except Conflict as exc:  # not curated yet, or the service cannot compare it now
            err.print(f"[yellow]neighbours not shown:[/] {escape(exc.detail)}", highlight=False)
            return None
        return [Neighbour(id=other.id, score=other.score, status=other.status, occurred_at=other.occurred_at, title=other.title) for other in found]

    def decide(self, item_id: int, decision: Decision, reason: str) -> str | None:
        from goldenset_client import GoldensetError

        try:
            if decision is Decision.APPROVE:
                self.client.approve(item_id, reason or None)
            else:
                self.client.reject(item_id, reason)
        except GoldensetError as exc:
            return exc.detail or str(exc)
        return None

    def undo(self, item_id: int) -> ReviewUndone | str:
        from goldenset_client import GoldensetError

        try:
            return ReviewUndone.model_validate(self.client.undo_review(item_id).model_dump(mode="json"))
        except GoldensetError as exc:
            return exc.detail or str(exc)

    def pair(self, doubt: LowMarginDuplicate) -> tuple[Panel, Panel] | None:
        from goldenset_client import NotFound

        try:
            item, matched = self.client.get_item(doubt.item_id), self.client.get_item(doubt.matched_item_id)
        except NotFound:
            return None
        return item_panel(_shown(item), item.source), item_panel(_shown(matched), matched.source)

    def rule_not_duplicate(self, item_id: int, note: str) -> str | None:
        from goldenset_client import GoldensetError

        try:
            self.client.mark_not_duplicate(item_id, note)
        except GoldensetError as exc:
            return exc.detail or str(exc)
        return None


def _shown(item: object) -> Shown:
    """An item as the API answered it, as the panels show items."""
    return Shown.model_validate(item, from_attributes=True)


def remote_review(
    client: Client,
    *,
    eval_name: str | None,
    approve: list[int],
    reject: list[int],
    undo: list[int],
    reason: str,
    limit: int,
    neighbours: bool,
    margin: float,
    sealed_view: bool,
    claim: int | None = None,
    disputed: bool = False,
) -> None:
    """`review` over the API: undos, then decisions, by id (exit 3 when any was refused); or the
    interactive pass over the eval's review queue, then its low-margin duplicates. On an eval
    reviewed by a team (read from `GET /v1/evals/{name}`), `team_review` instead; `claim` (a batch
    size) and `disputed` are for such an eval only (exit 2 on any other)."""
    from service.items.team_review_cli import team_eval

    desk = RemoteDesk(client, with_neighbours=neighbours)
    team, evaluation = team_eval(client, eval_name) if eval_name is not None else (None, None)
    if team is not None:
        team_review(
            client, desk, team, approve=approve, reject=reject, undo=undo, reason=reason, limit=limit, margin=margin, sealed_view=sealed_view, claim=claim, disputed=disputed
        )
        return
    if claim is not None or disputed:
        what = f"eval {escape(eval_name)} is reviewed by single decisions" if eval_name is not None else "name the eval with --eval NAME"
        raise fail(f"--claim and --disputed work on an eval reviewed by a team (more than one vote per item, or a queue shared by claims or round-robin): {what}")
    if undo or approve or reject:
        refused = False
        for item_id in undo:
            undone = desk.undo(item_id)
            if isinstance(undone, str):
                err.print(f"[yellow]item {item_id} not undone:[/] {escape(undone)}", highlight=False)
                refused = True
            else:
                out.print(describe_undone(undone), highlight=False)
        for decision, ids in ((Decision.APPROVE, approve), (Decision.REJECT, reject)):
            for item_id in ids:
                problem = desk.decide(item_id, decision, reason)
                if problem is not None:
                    err.print(f"[yellow]item {item_id}[/]: {escape(problem)}", highlight=False)
                    refused = True
                else:
                    out.print(f"{'approved' if decision is Decision.APPROVE else 'rejected'}: {item_id}")
        if refused:
            raise typer.Exit(EXIT_REJECTED)
        return
    if eval_name is None:
        raise fail("over the API, review an eval's queue: --eval NAME (or act on ids with --approve/--reject/--undo)")
    if sealed_view:
        client.open_sealed_review(eval_name)
    page = ReviewQueuePage.model_validate(client.review_queue(eval_name, limit=limit).model_dump(mode="json"))
    doubtful = _doubtful(client, eval_name, evaluation.sources if evaluation is not None else None, margin=margin, limit=limit)
    review_pass(desk, page, doubtful, names=eval_name, margin=margin)


def team_review(
    client: Client,
    desk: RemoteDesk,
    team: TeamEval,
    *,
    approve: list[int],
    reject: list[int],
    undo: list[int],
    reason: str,
    limit: int,
    margin: float,
    sealed_view: bool,
    claim: int | None,
    disputed: bool,
) -> None:
    """`review` of an eval reviewed by a team: claim a batch of `claim` items first; then take back
    and vote by id (adjudicate with `disputed`; exit 3 when any was refused), or walk the token's
    own view (`mine`) casting votes, then the low-margin duplicates; or, with `disputed`, walk the
    disagreements deciding as adjudicator."""
    from service.items.team_review_cli import TeamDesk, act_on_ids, claim_batch, team_pass

    votes = TeamDesk(client, team.name, adjudicating=disputed)
    if claim is not None:
        claim_batch(client, team.name, claim)
    if undo or approve or reject:
        act_on_ids(votes, approve=approve, reject=reject, undo=undo, reason=reason)
        return
    if sealed_view:
        client.open_sealed_review(team.name)
    page = ReviewQueuePage.model_validate(client.review_queue(team.name, limit=limit, view="disputed" if disputed else "mine").model_dump(mode="json"))
    doubtful = [] if disputed else _doubtful(client, team.name, team.sources, margin=margin, limit=limit)
    team_pass(desk, votes, team, page, doubtful, margin=margin)


def _doubtful(client: Client, eval_name: str, sources: list[str] | None, *, margin: float, limit: int) -> list[LowMarginDuplicate]:
    """The eval's duplicates decided with a margin under `margin` (none at 0), closest call first,
    at most `limit`; `sources` the eval's (None: read from `GET /v1/evals/{name}`)."""
    doubtful: list[LowMarginDuplicate] = []
    if margin > 0:
        for source in sources if sources is not None else client.get_eval(eval_name).sources:
            doubtful += [LowMarginDuplicate.model_validate(entry.model_dump(mode="json")) for entry in client.low_margin(source=source, margin=margin, limit=limit)]
        doubtful = sorted(doubtful, key=lambda entry: entry.margin)[:limit]
    return doubtful
