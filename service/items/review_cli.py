"""The interactive pass of `goldenset review` (registered by `service.items.cli`): the review queue of
some sources as the API serves it (`service.evals.sealed_review.serve_queue`, each read audited),
oldest incident first, each item shown in full as "n of N" with its dedup decision and its nearest
curated neighbours (from stored vectors: the model is loaded, never run on a stored item); then the
duplicates dedup decided with a low margin, each beside the item it matched.

Sealed-bound items are shown by metadata only (source, date, status, dedup decision) unless the
command line holds a sealed review window on the eval (`--sealed-view`); their neighbours are never
shown, and neither is any sealed neighbour of another item, nor a low-margin pair with a sealed
side. Item text is printed as text, never read as Rich markup.

The pass itself (`review_pass`) asks a `ReviewDesk` for neighbours and to record decisions: the
database's here (`LocalDesk`), the API's with `--url` (`service.items.remote_review.RemoteDesk`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import typer
from pydantic import BaseModel
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from schemas.dedup import LowMarginDuplicate
from schemas.item import Item
from schemas.review import Decision, ReviewQueueEntry, ReviewQueuePage, ReviewUndone
from service.core.terminal import err, out

ENDPOINT = "goldenset review"
NEIGHBOURS = 3
PROMPT = "[a]pprove, [r]eject, [s]kip, [b]ack, [u]ndo, [q]uit"
KEYS = {"a": "approve", "r": "reject", "s": "skip", "b": "back", "u": "undo", "q": "quit"}
DOUBT_PROMPT = "[k]eep as duplicate, [n]ot a duplicate, [s]kip, [q]uit"
DOUBT_KEYS = {"k": "keep", "n": "not", "s": "skip", "q": "quit"}
NOUN = {Decision.APPROVE: "approval", Decision.REJECT: "rejection"}
WITHHELD_WHY = (
    "sealed-bound: this item is in (or bound for) an eval's sealed slice, so its title, input and reference are withheld "
    "and it is reviewed by its source, date, status and dedup decision. --sealed-view (with --eval) opens a sealed review "
    "window that shows such items in full: every read is audited, and opening it takes one unit of the eval's sealed-read budget."
)


def describe_undone(undone: ReviewUndone) -> str:
    """One line (Rich markup, item text escaped) saying which decision was undone."""
    reason = f", reason: {escape(undone.reason)}" if undone.reason else ""
    return (
        f"undid the {NOUN[undone.undone]} of item {undone.item_id} (taken by {escape(undone.decided_by)} at {undone.decided_at:%Y-%m-%d %H:%M}{reason}): "
        f"it is {undone.status} again, back in the review queue"
    )


def _texts(title: str, input_text: str, reference: str) -> list[RenderableType]:
    lines: list[RenderableType] = [Text(title, style="bold"), Text(input_text)]
    if reference:
        lines.append(Text.assemble(("reference: ", "dim"), reference))
    return lines


class Shown(BaseModel):
    """What a panel shows of an item (a stored `Item`, or an item as the API answers it)."""

    id: int | None
    external_id: str
    occurred_at: datetime
    title: str
    input: str
    reference: str


@dataclass(frozen=True)
class Neighbour:
    """A curated item near the one under review, as a row of its neighbours' table."""

    id: int
    score: float
    status: str
    occurred_at: datetime
    title: str


class ReviewDesk(Protocol):
    """Where a review pass reads neighbours and records what the person decides. Refusals come
    back as their detail (str), never raised: the pass names them and goes on."""

    def neighbours(self, item_id: int, count: int) -> list[Neighbour] | None:
        """Up to `count` curated, unsealed neighbours of the item (None: not shown at all)."""
        ...

    def decide(self, item_id: int, decision: Decision, reason: str) -> str | None:
        """Approve or reject; None when taken, else why not."""
        ...

    def undo(self, item_id: int) -> ReviewUndone | str:
        """Undo the newest decision this reviewer took of the item, or why not."""
        ...

    def pair(self, doubt: LowMarginDuplicate) -> tuple[Panel, Panel] | None:
        """The low-margin duplicate and the item it matched, as panels (None: one is gone)."""
        ...

    def rule_not_duplicate(self, item_id: int, note: str) -> str | None:
        """Rule the duplicate not one; None when taken, else why not."""
        ...


def item_panel(item: Item | Shown, source: str) -> Panel:
    """The item's whole title, input and reference, headed by its id, source, external id and date."""
    title = Text(f"item {item.id} · {source} · {item.external_id} · {item.occurred_at:%Y-%m-%d}")
    return Panel(Group(*_texts(item.title, item.input, item.reference)), title=title, title_align="left")


def _dedup_line(entry: ReviewQueueEntry) -> Text:
    decision = entry.dedup
    if decision is None:
        return Text("dedup: no decision recorded", style="dim")
    parts = [f"dedup: {decision.status}", f"stage {decision.stage}"]
    parts += [f"rule {decision.rule}"] if decision.rule else []
    parts += [f"score {decision.score:.3f}"] if decision.score is not None else []
    parts += [f"margin {decision.margin:.3f}"] if decision.margin is not None else []
    parts += [f"matched item {decision.matched_item_id}"] if decision.matched_item_id is not None else []
    parts.append(f"decided {decision.decided_at:%Y-%m-%d}")
    return Text(" · ".join(parts), style="dim")


def entry_panel(entry: ReviewQueueEntry, total: int, status: str) -> Panel:
    """A queue entry as "n of N": in full, or by metadata only with why when it is withheld."""
    head = [f"{entry.position} of {total}", f"item {entry.id}", entry.source, *([entry.external_id] if entry.external_id else []), f"{entry.occurred_at:%Y-%m-%d}", status]
    lines: list[RenderableType] = []
    if entry.withheld:
        lines.append(Text(WITHHELD_WHY, style="yellow"))
    else:
        lines += _texts(entry.title, entry.input, entry.reference)
        if entry.sealed:
            lines.append(Text("sealed-bound: shown in your sealed review window; this read is audited", style="yellow"))
    lines.append(_dedup_line(entry))
    if entry.dedup is not None and entry.dedup.explanation is not None:
        lines.append(Text(f"why: {entry.dedup.explanation.summary}", style="dim"))
    if entry.source_changed_at is not None:
        lines.append(Text(f"the source changed this item on {entry.source_changed_at:%Y-%m-%d} after a curator's edit, which it kept", style="yellow"))
    return Panel(Group(*lines), title=Text(" · ".join(head)), title_align="left")


def print_neighbours(found: list[Neighbour]) -> None:
    """The neighbours' table, or a line saying there are none."""
    if not found:
        out.print("[dim]no curated neighbours[/]")
        return
    table = Table("nearest", "score", "status", "date", "title", show_edge=False)
    for other in found:
        table.add_row(str(other.id), f"{other.score:.2f}", other.status, f"{other.occurred_at:%Y-%m-%d}", Text(other.title, overflow="fold"))
    out.print(table)


def ask(question: str, keys: dict[str, str]) -> str:
    """The action of the key pressed (or of its word; Enter: skip); an unknown key is named and
    asked again, never taken as a skip. The prompt is plain text: its brackets show as typed."""
    pressable = ", ".join(list(keys)[:-1]) + f" or {list(keys)[-1]}"
    while True:
        answer = typer.prompt(question, default="s").strip().lower()
        action = keys.get(answer) or (answer if answer in keys.values() else None)
        if action is not None:
            return action
        err.print(f"unknown key {escape(repr(answer))}: press {pressable}", highlight=False)


def ask_reason() -> str:
    """A reason for rejecting, asked until it is not blank."""
    reason = ""
    while not reason.strip():
        reason = typer.prompt("reason for rejecting")
    return reason


@dataclass
class QueuePass:
    """One pass over a page of the queue: the decisions it took, in order, so `u` can take the
    newest back, and the items skipped and not decided since."""

    desk: ReviewDesk
    page: ReviewQueuePage
    decided: dict[int, Decision] = field(default_factory=dict)
    taken: list[int] = field(default_factory=list)
    skipped: set[int] = field(default_factory=set)
    undone: int = 0

    def run(self) -> bool:
        """Ask about each entry in turn; False when the person quit."""
        entries, index, show = self.page.entries, 0, True
        while index < len(entries):
            entry = entries[index]
            if show:
                self._show(entry)
            show = True
            action = ask(f"{entry.position} of {self.page.total} · {PROMPT}", KEYS)
            if action == "quit":
                self._summary()
                return False
            if action == "skip":
                if entry.id not in self.decided:
                    self.skipped.add(entry.id)
                index += 1
            elif action == "back":
                if index == 0:
                    err.print("this is the first item of the pass: there is nothing before it", highlight=False)
                    show = False
                index = max(index - 1, 0)
            elif action == "undo":
                back_to = self._undo()
                show = back_to is not None
                index = index if back_to is None else back_to
            elif entry.id in self.decided:
                err.print(self._taken_already(entry), highlight=False)
                show = False
            else:
                decision = Decision.APPROVE if action == "approve" else Decision.REJECT
                self._decide(entry, decision, ask_reason() if decision is Decision.REJECT else "")
                index += 1
        self._summary()
        return True

    def _taken_already(self, entry: ReviewQueueEntry) -> str:
        """Why a second decision on the entry is not taken (Rich markup)."""
        return f"item {entry.id} was {self._status(entry)} in this pass; \\[u]ndo takes back this pass's newest decision"

    def _status(self, entry: ReviewQueueEntry) -> str:
        decision = self.decided.get(entry.id)
        return {Decision.APPROVE: "approved", Decision.REJECT: "rejected", None: entry.status}[decision]

    def _show(self, entry: ReviewQueueEntry) -> None:
        out.print(entry_panel(entry, self.page.total, self._status(entry)))
        if not entry.withheld and (found := self.desk.neighbours(entry.id, NEIGHBOURS)) is not None:
            print_neighbours(found)

    def _decide(self, entry: ReviewQueueEntry, decision: Decision, reason: str) -> None:
        refused = self.desk.decide(entry.id, decision, reason)
        if refused is not None:
            err.print(f"[yellow]not decided:[/] {escape(refused)}", highlight=False)
            return
        self.decided[entry.id] = decision
        self.taken.append(entry.id)
        self.skipped.discard(entry.id)

    def _undo(self) -> int | None:
        """Undo this pass's newest decision; the index of its entry, or None when nothing was undone."""
        if not self.taken:
            err.print("nothing to undo: no decision was taken in this pass", highlight=False)
            return None
        item_id = self.taken.pop()
        undone = self.desk.undo(item_id)
        if isinstance(undone, str):
            err.print(f"[yellow]not undone:[/] {escape(undone)}", highlight=False)
            return None
        del self.decided[item_id]
        self.undone += 1
        out.print(describe_undone(undone), highlight=False)
        return next(index for index, entry in enumerate(self.page.entries) if entry.id == item_id)

    def _summary(self) -> None:
        approved = sum(1 for decision in self.decided.values() if decision is Decision.APPROVE)
        out.print(f"approved {approved}, rejected {len(self.decided) - approved}, skipped {len(self.skipped)}, undone {self.undone}")
        beyond = self.page.total - len(self.page.entries)
        if beyond > 0:
            out.print(f"{beyond} more item(s) wait in the queue beyond --limit {self.page.limit}")


def review_pass(desk: ReviewDesk, page: ReviewQueuePage, doubtful: list[LowMarginDuplicate], *, names: str, margin: float) -> None:
    """The interactive pass over `page` of the queue of `names`, then over the `doubtful`
    duplicates, each decision recorded at once on `desk`."""
    names = escape(names)
    if not page.entries and not doubtful:
        out.print(f"nothing to review in {names}: no items waiting (unique and undecided) and no duplicates decided with a margin under {margin}", highlight=False)
        return
    if page.entries:
        out.print(f"{page.total} item(s) to review in {names}, oldest incident first", highlight=False)
        if page.withheld:
            out.print(
                f"[yellow]{page.withheld} of them are sealed-bound and shown by metadata only[/] (source, date, status, dedup decision): "
                "--sealed-view (with --eval) opens an audited sealed review window, which takes one unit of the eval's sealed-read budget",
                highlight=False,
            )
        if not QueuePass(desk=desk, page=page).run():
            return
    if doubtful:
        review_doubtful(desk, doubtful, margin=margin)


def review_doubtful(desk: ReviewDesk, doubtful: list[LowMarginDuplicate], *, margin: float) -> None:
    """Show each low-margin duplicate beside the item it matched: keep it, or rule it not a duplicate."""
    counts = {"kept": 0, "ruled not a duplicate": 0, "skipped": 0}
    out.print(f"{len(doubtful)} duplicate(s) decided with a margin under {margin}: check each against the item it matched")
    for entry in doubtful:
        panels = desk.pair(entry)
        if panels is None:
            continue
        beside = Table.grid(expand=True, padding=(0, 1))
        beside.add_column(ratio=1)
        beside.add_column(ratio=1)
        beside.add_row(*panels)
        out.print(beside)
        out.print(f"{entry.status} of item {entry.duplicate_of} · stage {entry.stage} · rule {entry.rule} · score {entry.score:.3f} · margin {entry.margin:.3f}", highlight=False)
        action = ask(DOUBT_PROMPT, DOUBT_KEYS)
        if action == "quit":
            break
        if action in ("keep", "skip"):
            counts["kept" if action == "keep" else "skipped"] += 1
            continue
        note = ""
        while not note.strip():
            note = typer.prompt("why is it not a duplicate")
        refused = desk.rule_not_duplicate(entry.item_id, note)
        if refused is not None:
            err.print(f"[yellow]not ruled:[/] {escape(refused)}", highlight=False)
            continue
        counts["ruled not a duplicate"] += 1
    out.print(", ".join(f"{label} {count}" for label, count in counts.items()))
