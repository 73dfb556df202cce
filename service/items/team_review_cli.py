"""`goldenset review` on an eval reviewed by a team (`curation.team_rounds.is_team_review`), over
the API as the token's owner: each person votes with their own token, so the command line on the
database refuses such an eval (`service.items.cli`).

The interactive pass walks the token's own view of the queue (`mine`: its claimed batch, its
assignment, or every item it has not voted on) and `a`/`r` cast its votes, each answered with where
the item's round stands (waiting for more votes, decided, or disputed: an adjudicator decides);
`u` takes back the pass's newest vote while its round is open, or undoes the decision a vote or
an adjudication settled. `--claim N` claims a batch first; `--disputed` walks the disagreements,
and there `a`/`r` decide as the eval's adjudicator. Decisions by id are votes (adjudications with
`--disputed`) too. The items are shown as `service.items.review_cli` shows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import typer
from goldenset_client import Client, Conflict, Forbidden, GoldensetError, NotFound
from goldenset_client.models import ClaimOutcome, EvalRead, RoundOutcome
from rich.markup import escape
from rich.text import Text

from curation.team_review import person
from schemas.dedup import LowMarginDuplicate
from schemas.review import Decision, ReviewQueueEntry, ReviewQueuePage, ReviewUndone
from service.core.terminal import EXIT_REJECTED, err, out
from service.items.review_cli import QueuePass, ReviewDesk, describe_undone, review_doubtful

OPEN, CLAIM = "open", "claim"


@dataclass(frozen=True)
class TeamEval:
    """What the command line works by on an eval reviewed by a team: the votes an item needs at
    most, how the queue is shared (`open`, `claim`, `round_robin`), the review guidelines, and the
    eval's sources (None when the token may not read the eval: no `read` scope)."""

    name: str
    reviewers_per_item: int
    assignment: str
    guidelines: str
    sources: list[str] | None


def team_eval(client: Client, name: str) -> tuple[TeamEval | None, EvalRead | None]:
    """The eval's team settings when it is reviewed by a team (else None), and the eval as
    `GET /v1/evals/{name}` answers it (None when that is refused or the eval is not found: the
    command goes on as for an eval reviewed by single decisions, and says what is missing where it
    needs the eval). A token without the `read` scope is told by the team endpoint (`curate`)."""
    try:
        evaluation = client.get_eval(name)
    except NotFound:
        return None, None
    except Forbidden:
        try:
            team = client.review_team(name)
        except (Forbidden, NotFound):
            return None, None
        if team.reviewers_per_item > 1 or team.assignment != OPEN:  # the service takes team settings only with manual approval
            return TeamEval(team.eval, team.reviewers_per_item, team.assignment, team.guidelines, None), None
        return None, None
    if not evaluation.team_review:
        return None, evaluation
    return TeamEval(evaluation.name, evaluation.reviewers_per_item, evaluation.review_assignment, evaluation.review_guidelines, evaluation.sources), evaluation


def _voters(outcome: RoundOutcome) -> str:
    return ", ".join(f"{person(vote.reviewer)}: {vote.decision}" for vote in outcome.votes)


def describe_round(outcome: RoundOutcome, decision: Decision, *, adjudicated: bool) -> str:
    """One line (Rich markup, names escaped) saying what a vote or an adjudication did: the round
    waits for N more votes, was decided (agreed), or is disputed and goes to the adjudicator."""
    head = f"item {outcome.item_id}: {'adjudicated' if adjudicated else 'voted'} {decision.value}"
    if outcome.state == "waiting":
        missing = outcome.needed - len(outcome.votes)
        return f"{head}; waiting for {missing} more vote{'' if missing == 1 else 's'}"
    if outcome.state == "disputed":
        return f"{head}; disputed ({escape(_voters(outcome))}): goes to the adjudicator"
    if adjudicated:
        votes = f" over the votes ({escape(_voters(outcome))})" if outcome.votes else ""
        return f"{head}; decided{votes}: {outcome.status}"
    agreed = " (agreed)" if len(outcome.votes) > 1 else ""
    return f"{head}; decided{agreed}: {outcome.status}"


def refusal(exc: GoldensetError) -> str:
    """A refused request as `(reason) detail`, for one line after what was not done (escaped)."""
    detail = escape(exc.detail or exc.title or str(exc))
    return f"({escape(exc.reason)}) {detail}" if exc.reason else detail


@dataclass
class TeamDesk:
    """Votes, or an adjudicator's decisions (`adjudicating`), on one eval through the API, and
    taking them back, as the token's owner."""

    client: Client
    eval_name: str
    adjudicating: bool

    def cast(self, item_id: int, decision: Decision, reason: str) -> RoundOutcome | GoldensetError:
        """The item's round after this vote or adjudication, or the refusal."""
        send = self.client.adjudicate if self.adjudicating else self.client.vote
        try:
            return send(self.eval_name, item_id, "approve" if decision is Decision.APPROVE else "reject", reason)
        except GoldensetError as exc:
            return exc

    def withdraw(self, item_id: int) -> RoundOutcome | GoldensetError:
        """The item's round once this person's open vote is taken back, or the refusal."""
        try:
            return self.client.withdraw_vote(self.eval_name, item_id)
        except GoldensetError as exc:
            return exc

    def undo(self, item_id: int) -> ReviewUndone | GoldensetError:
        """Undo the newest decision this person took of the item (a round their vote settled, or
        an adjudication), or the refusal."""
        try:
            return ReviewUndone.model_validate(self.client.undo_review(item_id).model_dump(mode="json"))
        except GoldensetError as exc:
            return exc

    def take_back(self, item_id: int) -> str | GoldensetError:
        """This person's open vote on the item taken back, or else the decision it settled undone:
        the line saying which (Rich markup), or the refusal."""
        withdrawn = self.withdraw(item_id)
        if isinstance(withdrawn, RoundOutcome):
            return withdrawn_line(item_id)
        if not (isinstance(withdrawn, Conflict) and withdrawn.reason == "no_vote"):
            return withdrawn
        undone = self.undo(item_id)
        return undone if isinstance(undone, GoldensetError) else describe_undone(undone)


def withdrawn_line(item_id: int) -> str:
    """The line saying this person's open vote on the item was taken back."""
    return f"took back your vote on item {item_id}: it waits for your vote again"


def claim_batch(client: Client, eval_name: str, size: int) -> ClaimOutcome:
    """Claim up to `size` items of the eval for the token's owner and say what they hold, until when."""
    held = client.claim_review_batch(eval_name, size)
    if not held.held or held.expires_at is None:
        out.print(f"nothing to claim in {escape(eval_name)}: every item waiting has the reviewers it needs, or you voted on it", highlight=False)
    else:
        out.print(
            f"you hold {len(held.held)} item(s) of {escape(eval_name)} ({len(held.claimed)} new) until {held.expires_at:%Y-%m-%d %H:%M} UTC; "
            "nobody else is handed them meanwhile: " + ", ".join(str(item_id) for item_id in held.held),
            highlight=False,
        )
    return held


def act_on_ids(desk: TeamDesk, *, approve: Sequence[int], reject: Sequence[int], undo: Sequence[int], reason: str) -> None:
    """Take back (`undo`), then cast votes (or adjudicate) by id, printing each round's state and
    each refusal with its reason; exit 3 when any was refused."""
    refused = False
    for item_id in undo:
        taken = desk.take_back(item_id)
        if isinstance(taken, GoldensetError):
            err.print(f"[yellow]item {item_id} not taken back:[/] {refusal(taken)}", highlight=False)
            refused = True
        else:
            out.print(taken, highlight=False)
    for decision, ids in ((Decision.APPROVE, approve), (Decision.REJECT, reject)):
        for item_id in ids:
            outcome = desk.cast(item_id, decision, reason)
            if isinstance(outcome, GoldensetError):
                err.print(f"[yellow]item {item_id} not {'decided' if desk.adjudicating else 'voted on'}:[/] {refusal(outcome)}", highlight=False)
                refused = True
            else:
                out.print(describe_round(outcome, decision, adjudicated=desk.adjudicating), highlight=False)
    if refused:
        raise typer.Exit(EXIT_REJECTED)


@dataclass
class TeamPass(QueuePass):
    """`QueuePass` on a team view: a decision is this person's vote (or adjudication) on the item,
    and `u` takes back the newest one (`TeamDesk.take_back`)."""

    votes: TeamDesk = field(kw_only=True)
    rounds: dict[int, RoundOutcome] = field(default_factory=dict, kw_only=True)

    def _decide(self, entry: ReviewQueueEntry, decision: Decision, reason: str) -> None:
        outcome = self.votes.cast(entry.id, decision, reason)
        if isinstance(outcome, GoldensetError):
            err.print(f"[yellow]not {'decided' if self.votes.adjudicating else 'voted'}:[/] {refusal(outcome)}", highlight=False)
            return
        out.print(describe_round(outcome, decision, adjudicated=self.votes.adjudicating), highlight=False)
        self.decided[entry.id] = decision
        self.rounds[entry.id] = outcome
        self.taken.append(entry.id)
        self.skipped.discard(entry.id)

    def _taken_already(self, entry: ReviewQueueEntry) -> str:
        verb = "decided" if self.votes.adjudicating else "voted on"
        return f"you {verb} item {entry.id} in this pass ({self._status(entry)}); \\[u]ndo takes back this pass's newest {'decision' if self.votes.adjudicating else 'vote'}"

    def _status(self, entry: ReviewQueueEntry) -> str:
        outcome, decision = self.rounds.get(entry.id), self.decided.get(entry.id)
        if outcome is None or decision is None:
            return "disputed" if self.votes.adjudicating else entry.status
        if outcome.state == "decided":
            return outcome.status
        return f"your vote: {decision.value}, {outcome.state}"

    def _undo(self) -> int | None:
        if not self.taken:
            err.print(f"nothing to take back: no {'decision' if self.votes.adjudicating else 'vote'} was taken in this pass", highlight=False)
            return None
        item_id = self.taken[-1]
        outcome = self.rounds[item_id]
        taken: str | GoldensetError
        if outcome.state == "decided":
            undone = self.votes.undo(item_id)
            taken = undone if isinstance(undone, GoldensetError) else describe_undone(undone)
        else:
            withdrawn = self.votes.withdraw(item_id)
            taken = withdrawn if isinstance(withdrawn, GoldensetError) else withdrawn_line(item_id)
        if isinstance(taken, GoldensetError):
            err.print(f"[yellow]not taken back:[/] {refusal(taken)}", highlight=False)
            return None
        self.taken.pop()
        del self.decided[item_id], self.rounds[item_id]
        self.undone += 1
        out.print(taken, highlight=False)
        return next(index for index, entry in enumerate(self.page.entries) if entry.id == item_id)

    def _summary(self) -> None:
        approved = sum(1 for decision in self.decided.values() if decision is Decision.APPROVE)
        rejected = len(self.decided) - approved
        if self.votes.adjudicating:
            out.print(f"adjudicated: approved {approved}, rejected {rejected}, skipped {len(self.skipped)}, undone {self.undone}")
        else:
            out.print(f"voted to approve {approved}, to reject {rejected}, skipped {len(self.skipped)}, taken back {self.undone}")
        beyond = self.page.total - len(self.page.entries)
        if beyond > 0:
            out.print(f"{beyond} more item(s) wait in this view beyond --limit {self.page.limit}")


def team_pass(desk: ReviewDesk, votes: TeamDesk, team: TeamEval, page: ReviewQueuePage, doubtful: list[LowMarginDuplicate], *, margin: float) -> None:
    """The interactive pass over `page` of the eval's team view (the token's own, or the
    disagreements when `votes` adjudicates), then over the `doubtful` duplicates."""
    name = escape(team.name)
    if team.guidelines.strip():
        out.print(Text(f"guidelines: {team.guidelines.strip()}", style="dim"))
    if votes.adjudicating:
        intro = f"{page.total} disagreement(s) in {name} wait for an adjudicator, oldest incident first: a/r decide the item"
        empty = f"no disagreements in {name} wait for an adjudicator"
    else:
        needs = f"up to {team.reviewers_per_item} agreeing votes decide an item, differing ones go to an adjudicator"
        intro = f"{page.total} item(s) wait for your vote in {name}, oldest incident first: a/r cast your vote ({needs})"
        empty = f"nothing waits for your vote in {name}" + ("; claim a batch with --claim N" if team.assignment == CLAIM else "")
    if page.entries:
        out.print(intro, highlight=False)
        if page.withheld:
            out.print(
                f"[yellow]{page.withheld} of them are sealed-bound and shown by metadata only[/]: --sealed-view opens an audited sealed review window "
                "(one unit of the eval's sealed-read budget); a vote to approve needs the item's text shown to you",
                highlight=False,
            )
        if not TeamPass(desk=desk, page=page, votes=votes).run():
            return
    else:
        out.print(empty, highlight=False)
    if doubtful:
        review_doubtful(desk, doubtful, margin=margin)
