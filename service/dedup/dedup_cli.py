"""The `goldenset dedup` group: `stats`, dedup's figures; people's rulings on duplicates,
`not-duplicate` and `duplicate-of`; and the questions dedup asks a curator, `questions` and
`answer` (registered by `service.dedup.cli`).

Exit status of the rulings and answers: 0 when ruled, 3 when refused (the reason is printed), 2 on
bad usage or an unknown item or question. A refusal is answered as every command's is
(`service.core.terminal.refusal_exit`, by its HTTP status: 404 is 2, any other 3).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

import typer
from rich.table import Table
from sqlmodel import Session

from curation.dedup.answers import answer_question
from curation.dedup.overrides import rule_duplicate_of, rule_not_duplicate
from schemas.common import MAX_ROW_ID, utcnow
from schemas.dedup import DedupStats
from schemas.dedup_questions import DedupQuestionPage, DedupQuestionRead, QuestionRuling, QuestionState
from schemas.item import Item
from service.core.db import write_transaction
from service.core.remote import remote_client
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, open_engine, out
from service.dedup.questions import question_page
from service.dedup.reads import stats_for_readers
from service.evals.sealed_review import revealed_evals

dedup_app = typer.Typer(help="Dedup's figures, and people's rulings on duplicates.", no_args_is_help=True)
ItemArgument = Annotated[int, typer.Argument(min=1, max=MAX_ROW_ID, help="The item's id.")]
NoteOption = Annotated[str, typer.Option("--note", help="Why (required): kept with the ruling and in the audit trail.")]


@dedup_app.command("stats")
def stats(as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON (the shape of `GET /v1/dedup/stats`).")] = False) -> None:
    """What dedup decided: items by status, decisions in force by stage and rule, cluster sizes and
    the largest clusters (a sealed representative's title withheld), rulings in force by kind and
    the share of decided items marked duplicate. Works over the API with --url."""
    with remote_client() as client:
        if client is not None:
            figures = DedupStats.model_validate(client.dedup_stats().model_dump(mode="json"))
        else:
            with Session(open_engine()) as session:
                figures = stats_for_readers(session=session, secret_key=get_settings().secret_key.get_secret_value())
    if as_json:
        typer.echo(figures.model_dump_json(indent=2))
        return
    _print_stats(figures)


def _print_stats(figures: DedupStats) -> None:
    out.print(f"{figures.items} items; {figures.duplicate_share:.1%} of those dedup decided are duplicates", highlight=False)
    statuses = Table("status", "items", title="items by status")
    for status, count in figures.by_status.items():
        statuses.add_row(status, str(count))
    decisions = Table("stage", "rule", "decisions", title="decisions in force")
    for row in figures.decisions:
        decisions.add_row(row.stage, row.rule or "-", str(row.count))
    sizes = Table("items in the cluster", "clusters", title="cluster sizes")
    for size in figures.cluster_sizes:
        sizes.add_row(str(size.size), str(size.clusters))
    largest = Table("representative", "status", "items", "title", title="largest clusters")
    for cluster in figures.largest_clusters:
        largest.add_row(str(cluster.representative), cluster.status, str(cluster.size), "(sealed)" if cluster.sealed else cluster.title[:90])
    rulings = Table("kind", "rulings in force", title="people's rulings")
    for kind, count in figures.overrides.items():
        rulings.add_row(kind, str(count))
    for table in (statuses, decisions, sizes, largest, rulings):
        out.print(table)


def _rule(rule: Callable[..., Item]) -> Item:
    """Apply a ruling in its own unit of work; a refusal (`OverrideRefused`) writes nothing and ends
    the command with its reason."""
    with write_transaction(open_engine()) as session:
        return rule(session=session)


@dedup_app.command("not-duplicate")
def not_duplicate(item: ItemArgument, note: NoteOption) -> None:
    """Rule that a duplicate (or contaminated) item is not a duplicate of the item it names: it
    becomes unique (and waits for review), and no curation run matches the pair again.

    Exit status: 0 when ruled, 3 when refused (the reason is printed), 2 on bad usage or an unknown item."""
    _rule(partial(rule_not_duplicate, item_id=item, note=note, actor=CLI_ACTOR, now=utcnow()))
    out.print(f"item {item} is unique now: ruled not a duplicate, and never matched with that item again", highlight=False)


@dedup_app.command("duplicate-of")
def duplicate_of(item: ItemArgument, other: Annotated[int, typer.Argument(min=1, max=MAX_ROW_ID, help="The id of the item it duplicates.")], note: NoteOption) -> None:
    """Rule by hand that ITEM, a curated item, is a duplicate of OTHER, which is no duplicate
    itself: it becomes duplicate (contaminated when OTHER belongs to a reference corpus) and stays
    so whenever it is curated again.

    Exit status: 0 when ruled, 3 when refused (the reason is printed), 2 on bad usage or an unknown item."""
    ruled = _rule(partial(rule_duplicate_of, item_id=item, other_id=other, note=note, actor=CLI_ACTOR, now=utcnow()))
    out.print(f"item {item} is {ruled.status} of item {other} now, by this ruling, on every curation run", highlight=False)


@dedup_app.command("questions")
def questions(
    source: Annotated[str | None, typer.Option("--source", help="Only questions about items of this source.")] = None,
    state: Annotated[QuestionState | None, typer.Option("--state", help="Only questions in this state (default: open).")] = QuestionState.OPEN,
    every: Annotated[bool, typer.Option("--all", help="Questions in every state.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=200, help="How many questions.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print the questions as JSON (the shape of `GET /v1/dedup/questions`).")] = False,
) -> None:
    """The pairs dedup asks a curator about, oldest first: both items, the judge's P (same
    incident), what the rules decided and why it was asked (a sealed item's text withheld).
    Answer with `goldenset dedup answer ID same|distinct`. Works over the API with --url."""
    wanted = None if every else state
    with remote_client() as client:
        if client is not None:
            answered = client.dedup_questions(source=source, state=wanted.value if wanted else None, limit=limit)
            page = DedupQuestionPage.model_validate(answered.model_dump(mode="json"))
        else:
            with Session(open_engine()) as session:
                reads, _shown, next_cursor = question_page(
                    session=session,
                    secret_key=get_settings().secret_key.get_secret_value(),
                    source=source,
                    state=wanted,
                    limit=limit,
                    revealed=revealed_evals(session=session, token_id=None),
                )
            page = DedupQuestionPage(questions=reads, next_cursor=next_cursor)
    if as_json:
        typer.echo(page.model_dump_json(indent=2))
        return
    if not page.questions:
        out.print("no dedup questions" + (f" {wanted.value}" if wanted else ""), highlight=False)
        return
    table = Table("question", "state", "P same", "rules", "item", "earlier item", "why", title="dedup questions")
    for question in page.questions:
        table.add_row(
            str(question.id),
            question.state.value + (f" ({question.ruling.value})" if question.ruling else ""),
            f"{question.p_same:.2f}",
            question.rules_outcome,
            _side(question.item),
            _side(question.other),
            question.why,
        )
    out.print(table)


def _side(item: Any) -> str:
    """One item of a pair in a table cell (its title withheld when it is sealed)."""
    return f"{item.id}: (sealed)" if item.sealed else f"{item.id}: {item.title[:60]}"


@dedup_app.command("answer")
def answer(
    question: Annotated[int, typer.Argument(min=1, max=MAX_ROW_ID, help="The question's id (`goldenset dedup questions`).")],
    ruling: Annotated[QuestionRuling, typer.Argument(help="same: one incident (the later item becomes a duplicate of the earlier); distinct: two incidents.")],
    note: Annotated[str, typer.Option("--note", help="Why (optional): kept with the ruling and in the audit trail.")] = "",
) -> None:
    """Answer a dedup question: `same` makes the later item of the pair a duplicate of the earlier,
    `distinct` rules the pair apart; either is a ruling every later curation run keeps. Works over
    the API with --url.

    Exit status: 0 when answered, 3 when refused (already answered, withdrawn, or the ruling is
    refused: the reason is printed), 2 on bad usage or an unknown question."""
    with remote_client() as client:
        if client is not None:
            read = DedupQuestionRead.model_validate(client.answer_question(question, ruling.value, note or None).model_dump(mode="json"))
            item_id, other_id = read.item.id, read.other.id
        else:
            with write_transaction(open_engine()) as session:
                answered = answer_question(session=session, question_id=question, ruling=ruling, note=note, actor=CLI_ACTOR, token_id=None, now=utcnow())
                item_id, other_id = answered.item_id, answered.other_id
    verdict = "the same incident: the later one is a duplicate of the earlier now" if ruling is QuestionRuling.SAME else "distinct incidents: never matched again"
    out.print(f"question {question} answered: items {item_id} and {other_id} are {verdict}", highlight=False)
