"""`goldenset review` run in-process on every backend: the interactive pass walks the review queue
oldest incident first as "n of N", shows each item's whole text literally, asks again on an
unknown key, goes back and undoes; decisions are undone by id; sealed-bound items are shown by
metadata only unless `--sealed-view` opens an audited, budgeted sealed review window."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from typer.testing import CliRunner

from curation.review import decide
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.item import Item
from schemas.review import Decision
from service.cli import app
from service.core.db import write_transaction
from tests.eval_support import HashingEncoder, ingest_and_curate
from tests.eval_support import item_ids_by_external_id as _ids
from tests.evals.integration.test_refresh import kev
from tests.support.command_line import REVIEW_MODULES, command_line

LONG_TAIL = "tailmarker-past-six-hundred"
PROMPT = "[a]pprove, [r]eject, [s]kip, [b]ack, [u]ndo, [q]uit"


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.evals.cli", *REVIEW_MODULES)) as runner:
        yield runner


def _statuses(engine: Engine) -> dict[str, str]:
    with Session(engine) as session:
        return {item.external_id: item.status for item in session.exec(select(Item))}


def _events(engine: Engine, action: str) -> list[AuditEvent]:
    with Session(engine) as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == action).order_by(col(AuditEvent.id))))


def _records() -> list[dict[str, Any]]:
    """Five incidents ingested newest first (so ids do not follow dates): one with markup in its
    title, one whose description runs well past 600 characters."""
    records = [kev(n, f"2024-02-{n:02d}") for n in range(5, 0, -1)]
    records[-1]["vulnerabilityName"] = "[bold]x[/bold] in the [red]login[/] page"
    long_text = " ".join(f"clause{word} of a long incident report about a login outage" for word in range(20))
    records[-2]["shortDescription"] = f"{long_text} {LONG_TAIL}"
    return records


def test_the_pass_goes_oldest_first_as_n_of_n_and_asks_again_goes_back_and_undoes(cli: CliRunner, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", _records())
    ids = _ids(engine)
    first, second = ids["CVE-2024-0001"], ids["CVE-2024-0002"]
    assert cli.invoke(app, ["eval", "create", "ops", "--source", "kev", "--sealed-fraction", "0"]).exit_code == 0
    # 1: unknown key, then approve. 2: back to 1 (approved: a/r refused there), skip back to 2.
    # 2: reject with a reason asked twice. Undo: the rejection of 2 is taken back and 2 shown again.
    # 2: approve. 3: unknown word, then quit.
    keys = ["x", "a", "b", "a", "s", "r", "", "not gradable", "u", "a", "nope", "q"]
    result = cli.invoke(app, ["review", "--eval", "ops", "--margin", "0"], input="\n".join(keys) + "\n")
    assert result.exit_code == 0, result.output
    output = result.output
    assert "5 item(s) to review in kev, oldest incident first" in output
    assert f"1 of 5 · {PROMPT}" in output and f"3 of 5 · {PROMPT}" in output and "4 of 5" not in output
    assert output.index("1 of 5 · item") < output.index("2 of 5 · item")
    assert "unknown key 'x': press a, r, s, b, u or q" in output and "unknown key 'nope'" in output
    assert f"item {first} was approved in this pass; [u]ndo" in output
    assert f"undid the rejection of item {second} (taken by cli" in output and "reason: not gradable" in output
    assert output.count("2 of 5 · item") == 3  # first shown, after the back-and-skip, after the undo
    assert "[bold]x[/bold] in the [red]login[/] page" in output  # markup in item text is printed as text
    assert LONG_TAIL in output  # no cut at 600 characters
    assert "approved 2, rejected 0, skipped 0, undone 1" in output
    assert _statuses(engine) == {"CVE-2024-0001": "approved", "CVE-2024-0002": "approved", "CVE-2024-0003": "unique", "CVE-2024-0004": "unique", "CVE-2024-0005": "unique"}
    assert [(event.object_id, event.details["undone"]) for event in _events(engine, "item.review_undone")] == [(str(second), "reject")]
    [read] = _events(engine, "item.read")
    assert (read.actor, read.details["endpoint"], read.count) == ("cli", "goldenset review", 5)

    # The next pass starts at the oldest item still waiting.
    again = cli.invoke(app, ["review", "--source", "kev", "--no-neighbours", "--margin", "0", "--limit", "2"], input="s\ns\n")
    assert again.exit_code == 0, again.output
    assert "1 of 3 · item" in again.output and "CVE-2024-0003" in again.output and "2 of 3 · item" in again.output
    assert "approved 0, rejected 0, skipped 2, undone 0" in again.output and "1 more item(s) wait in the queue beyond --limit 2" in again.output
    assert "nothing to undo" in cli.invoke(app, ["review", "--source", "kev", "--no-neighbours", "--margin", "0"], input="u\nq\n").output


def test_the_help_shows_the_keys_with_their_brackets(cli: CliRunner) -> None:
    shown = cli.invoke(app, ["review", "--help"], terminal_width=100)
    assert shown.exit_code == 0
    for key in ("[a]pprove", "[r]eject", "[s]kip", "[b]ack", "[u]ndo", "[q]uit", "[k]eep", "[n]ot a duplicate"):
        assert key in shown.output
    assert "--sealed-view" in shown.output and "--undo" in shown.output


def test_decisions_are_undone_by_id(cli: CliRunner, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 5)])
    ids = _ids(engine)
    one, two, three, four = (ids[f"CVE-2024-000{n}"] for n in range(1, 5))
    assert cli.invoke(app, ["review", "--approve", str(one), "--reject", str(two), "--reason", "no clear answer"]).exit_code == 0
    with write_transaction(engine) as session:
        decide(session=session, item_id=three, decision=Decision.APPROVE, reason="", actor="token:alice", now=utcnow())

    undone = cli.invoke(app, ["review", "--undo", str(one), "--undo", str(two)])
    assert undone.exit_code == 0, undone.output
    assert f"undid the approval of item {one}" in undone.output and f"undid the rejection of item {two}" in undone.output and "reason: no clear answer" in undone.output
    assert _statuses(engine)["CVE-2024-0001"] == _statuses(engine)["CVE-2024-0002"] == "unique"

    refused = cli.invoke(app, ["review", "--undo", str(one), "--undo", str(three), "--undo", str(four), "--undo", "987654"])
    assert refused.exit_code == 3
    assert f"item {one} not undone (not_reviewed)" in refused.output and "undone already" in refused.output
    assert f"item {three} not undone (not_yours)" in refused.output and "token:alice" in refused.output
    assert f"item {four} not undone (not_reviewed)" in refused.output and "item 987654 not undone (not_found)" in refused.output
    assert _statuses(engine)["CVE-2024-0003"] == "approved"

    # An undo and a new decision at once: the approval becomes a rejection.
    assert cli.invoke(app, ["review", "--approve", str(four)]).exit_code == 0
    changed = cli.invoke(app, ["review", "--undo", str(four), "--reject", str(four), "--reason", "ambiguous"])
    assert changed.exit_code == 0, changed.output
    assert _statuses(engine)["CVE-2024-0004"] == "rejected"
    assert [event.object_id for event in _events(engine, "item.review_undone")] == [str(one), str(two), str(four)]


def _sealed_records(source: str, count: int) -> list[dict[str, Any]]:
    return [{**kev(n, f"2024-02-{n:02d}"), "cveID": f"{source.upper()}-{n}", "vulnerabilityName": f"secret-title-{source}-{n}"} for n in range(1, count + 1)]


def test_sealed_bound_items_are_shown_only_in_an_audited_sealed_review_window(cli: CliRunner, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", _sealed_records("kev", 3))
    create = ["eval", "create", "ops", "--source", "kev", "--sealed-fraction", "1", "--sealed-read-budget", "1"]
    assert cli.invoke(app, create).exit_code == 0

    hidden = cli.invoke(app, ["review", "--eval", "ops", "--margin", "0"], input="s\ns\nq\n")
    assert hidden.exit_code == 0, hidden.output
    assert "secret-title" not in hidden.output and "KEV-" not in hidden.output and "thing 1 via path" not in hidden.output
    assert "3 of them are sealed-bound and shown by metadata only" in hidden.output and "--sealed-view" in hidden.output
    assert "1 of 3 · item" in hidden.output and "3 of 3 · item" in hidden.output and "2024-02-01" in hidden.output
    assert "sealed-bound: this item is in (or bound for) an eval's sealed slice" in hidden.output
    assert "nearest" not in hidden.output  # never the neighbours of a withheld item
    assert _events(engine, "item.read") == [] and _events(engine, "item.sealed_review_read") == []

    assert cli.invoke(app, ["review", "--source", "kev", "--sealed-view"]).exit_code == 2  # a window is opened on an eval

    shown = cli.invoke(app, ["review", "--eval", "ops", "--sealed-view", "--margin", "0"], input="a\nq\n")
    assert shown.exit_code == 0, shown.output
    assert "sealed review window on eval ops opened now" in shown.output and "1 of its sealed-read budget of 1 used" in shown.output
    assert "secret-title-kev-1" in shown.output and "secret-title-kev-2" in shown.output
    assert "shown in your sealed review window; this read is audited" in shown.output
    [opened] = _events(engine, "eval.sealed_review_opened")
    assert (opened.actor, opened.object_id, opened.details["token_id"]) == ("cli", "ops", None)
    [read] = _events(engine, "item.sealed_review_read")
    assert (read.actor, read.object_id, read.count, read.details["endpoint"], read.details["token_id"]) == ("cli", "ops", 3, "goldenset review", None)
    assert _statuses(engine)["KEV-1"] == "approved"

    # The window stays open for the command line: asking again counts nothing.
    reopened = cli.invoke(app, ["review", "--eval", "ops", "--sealed-view", "--margin", "0"], input="q\n")
    assert reopened.exit_code == 0 and "already open" in reopened.output and "secret-title-kev-2" in reopened.output
    assert len(_events(engine, "eval.sealed_review_opened")) == 1
    # Without --sealed-view, the window is not used.
    assert "secret-title" not in cli.invoke(app, ["review", "--eval", "ops", "--margin", "0"], input="q\n").output

    # An eval whose budget is spent opens no window.
    ingest_and_curate(engine, "vault", _sealed_records("vault", 2))
    assert cli.invoke(app, ["eval", "create", "closed", "--source", "vault", "--sealed-fraction", "1", "--sealed-read-budget", "0"]).exit_code == 0
    spent = cli.invoke(app, ["review", "--eval", "closed", "--sealed-view"], input="q\n")
    assert spent.exit_code == 7 and "sealed-read budget" in spent.output and "secret-title-vault" not in spent.output
    assert [event.object_id for event in _events(engine, "eval.sealed_review_refused")] == ["closed"]


def test_a_refused_edit_is_answered_as_every_refused_decision(cli: CliRunner, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(1, "2024-02-01")])
    item_id = _ids(engine)["CVE-2024-0001"]
    with Session(engine) as session:
        item = session.get(Item, item_id)
        assert item is not None
        title = item.title
    unchanged = cli.invoke(app, ["item", "edit", str(item_id), "--note", "same title", "--title", title])
    assert unchanged.exit_code == 3 and "refused (no_change)" in unchanged.output, unchanged.output
    missing = cli.invoke(app, ["item", "edit", "987654", "--note", "no such item", "--title", "anything"])
    assert missing.exit_code == 2 and "refused (not_found)" in missing.output and "no item with id 987654" in missing.output
    edited = cli.invoke(app, ["item", "edit", str(item_id), "--note", "clearer title", "--title", f"{title} (clarified)"])
    assert edited.exit_code == 0 and f"item {item_id} is at revision 2 now" in edited.output, edited.output
    assert [event.object_id for event in _events(engine, "item.edit")] == [str(item_id)]
