"""The `goldenset item` group: `show`, an item as `GET /v1/items/{id}` shows it with why dedup
decided as it did; `edit`, a curator's edit of an item as a new revision; and `revisions`, an
item's history with what each revision changed (registered by `service.items.cli`).

An item in (or bound for) an eval's sealed slice is edited, and its history shown with its text,
only when asked for by name with `--sealed`, and such a read is audited as the API audits it.

Exit status: 0 when done, 3 when an edit is refused (the reason is printed; a refusal is answered
by the command group, `service.core.terminal.refusal_exit`), 2 on bad usage or no such item.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from sqlmodel import Session

from curation.editing import edit_item, item_revisions
from schemas.audit import AuditAction
from schemas.common import MAX_ROW_ID, utcnow
from schemas.dedup import DedupCandidate
from schemas.item import FieldChange, ItemDetail, ItemEdit, ItemRevisions, ItemStatus
from service.core.audit import record_read
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, fail, open_engine, out

item_app = typer.Typer(help="Show an item and why dedup decided as it did, edit items, and show what each revision changed.", no_args_is_help=True)
ItemArgument = Annotated[int, typer.Argument(min=1, max=MAX_ROW_ID, help="The item's id.")]
SealedOption = Annotated[bool, typer.Option("--sealed", help="The item is in (or bound for) a sealed slice, and you mean to work on its text (audited).")]


def _text_file(path: Path | None, what: str) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read the {what} from {path}: {exc}") from exc


def _is_sealed(session: Session, item_id: int) -> bool:
    from service.items.shaping import withheld  # the dedup index's modules load only when a command runs

    return item_id in withheld(session=session, item_ids=[item_id], secret_key=get_settings().secret_key.get_secret_value())


@item_app.command("edit")
def edit(
    item: ItemArgument,
    note: Annotated[str, typer.Option("--note", help="Why (required): kept with the revision and in the audit trail.")],
    title: Annotated[str | None, typer.Option("--title", help="The new title.")] = None,
    input_file: Annotated[Path | None, typer.Option("--input-file", help="A UTF-8 file holding the new input (what the model is asked).")] = None,
    reference_file: Annotated[Path | None, typer.Option("--reference-file", help="A UTF-8 file holding the new reference (the expected answer).")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeat); the tags given replace the item's.")] = None,
    sealed: SealedOption = False,
) -> None:
    """Edit ITEM as a new revision with a note saying why; fields not given stay as they are. A
    changed title, input or reference is decided by dedup again at the next curation run
    (`goldenset curate`, or the scheduler) and then reviewed again; releases keep the text they
    froze. An item in (or bound for) a sealed slice needs --sealed.

    Exit status: 0 when edited, 3 when refused (the reason is printed), 2 on bad usage or no
    such item."""
    try:
        data = ItemEdit(title=title, input=_text_file(input_file, "input"), reference=_text_file(reference_file, "reference"), tags=tag or None, note=note)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors())
        raise fail(problems) from exc
    with write_transaction(open_engine()) as session:
        if _is_sealed(session, item) and not sealed:
            raise fail(f"item {item} is in (or bound for) an eval's sealed slice: pass --sealed to edit it")
        edited = edit_item(
            session=session, item_id=item, title=data.title, input=data.input, reference=data.reference, tags=data.tags, note=data.note, actor=CLI_ACTOR, now=utcnow()
        )
        revision, status = edited.revision, edited.status
    out.print(f"item {item} is at revision {revision} now, written by you ({CLI_ACTOR})", highlight=False)
    if status == ItemStatus.CANDIDATE.value:
        out.print("its text is decided by dedup again at the next curation run (`goldenset curate`, or the scheduler), then reviewed again", highlight=False)


def _print_change(change: FieldChange) -> None:
    if change.before is None and change.after is None:
        out.print(f"  {change.field}: changed (withheld)", highlight=False)
    elif isinstance(change.before, list) or isinstance(change.after, list) or change.before is None:
        out.print(f"  {change.field}: {change.before!r} -> {change.after!r}", highlight=False, markup=False)
    else:
        diff = difflib.unified_diff(change.before.splitlines(), str(change.after).splitlines(), "before", "after", lineterm="")
        out.print(f"  {change.field}:", highlight=False)
        for line in diff:
            out.print(f"    {line}", highlight=False, markup=False)


def _print_revisions(history: ItemRevisions, *, shown: bool) -> None:
    out.print(f"item {history.item_id}: revision {history.revision}", highlight=False)
    if history.curated_revision is not None:
        out.print(f"its text is a curator's since revision {history.curated_revision}", highlight=False)
    if history.source_changed_at is not None:
        out.print(f"the source changed it on {history.source_changed_at:%Y-%m-%d %H:%M} UTC, held for a look (kind source_held below)", highlight=False)
    if history.sealed:
        out.print("it is in (or bound for) a sealed slice" + ("" if shown else ": its dates, notes and text are withheld (--sealed shows them)"), highlight=False)
    for entry in history.revisions:
        when = f"{entry.at:%Y-%m-%d %H:%M}" if entry.at is not None else "-"
        out.print(f"revision {entry.revision} · {entry.kind} · {when} · {entry.actor or '-'}", highlight=False)
        if entry.note:
            out.print(f"  note: {entry.note}", highlight=False, markup=False)
        if not entry.changes:
            out.print("  (no change to the title, input, reference or tags)")
        for change in entry.changes:
            _print_change(change)


@item_app.command("revisions")
def revisions(
    item: ItemArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print the history as JSON (the shape of `GET /v1/items/{id}/revisions`).")] = False,
    sealed: SealedOption = False,
) -> None:
    """Every revision of ITEM, oldest first: its kind (source, curator, or source_held: a change
    the source proposed to an edited item, which kept the curator's text), when, who, the note,
    and what changed in the title, input, reference and tags. An item in (or bound for) a sealed
    slice is shown without dates, notes or text unless --sealed.

    Exit status: 0 when shown, 2 on bad usage (no such item)."""
    engine = open_engine()
    with Session(engine) as session:
        try:
            from service.items.reads import require_item

            stored, _source = require_item(session, item)
        except ProblemError as exc:
            raise fail(exc.detail) from exc
        is_sealed = _is_sealed(session, item)
        history = item_revisions(session, stored, sealed=is_sealed, shown=sealed)
    if sealed or not is_sealed:
        action = AuditAction.ITEM_SEALED_REVISIONS_READ if is_sealed else AuditAction.ITEM_REVISIONS_READ
        record_read(engine, actor=CLI_ACTOR, action=action, endpoint="goldenset item revisions", object_type="item", object_id=None, item_ids=[item])
    if as_json:
        typer.echo(history.model_dump_json(indent=2))
        return
    _print_revisions(history, shown=sealed)


@item_app.command("show")
def show(
    item: ItemArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print the item as JSON (the shape of `GET /v1/items/{id}`).")] = False,
) -> None:
    """ITEM as `GET /v1/items/{id}` shows it: its source, status and title, how dedup judged it
    and why (the rule, the score, the threshold it cleared and the margin, the item matched, the
    best near-verbatim and paraphrase candidates, the matches refused and why, the fields the
    model cannot read). An item in (or bound for) a sealed slice is shown by id, source and status
    only, and items of a sealed slice it names are named "a sealed item". Audited as the API is.

    Exit status: 0 when shown, 2 on bad usage (no such item)."""
    from service.items.reads import item_detail  # the dedup index's modules load only when a command runs

    engine = open_engine()
    with Session(engine) as session:
        try:
            detail = item_detail(session, item, secret_key=get_settings().secret_key.get_secret_value())
        except ProblemError as exc:
            raise fail(exc.detail) from exc
    if not detail.sealed:
        record_read(engine, actor=CLI_ACTOR, action=AuditAction.ITEM_READ, endpoint="goldenset item show", object_type="item", object_id=None, item_ids=[item])
    if as_json:
        typer.echo(detail.model_dump_json(indent=2))
        return
    _print_detail(detail)


def _print_detail(detail: ItemDetail) -> None:
    head = f"item {detail.id} · {detail.source} · {detail.status}"
    if detail.sealed:
        out.print(f"{head} · in (or bound for) a sealed slice: its content and dedup details are withheld", highlight=False, markup=False)
        return
    out.print(f"{head} · {detail.external_id} · {detail.title}", highlight=False, markup=False)
    dedup = detail.dedup
    decided = [f"dedup: {dedup.status}", *([f"stage {dedup.stage}"] if dedup.stage else []), *([f"score {dedup.score:.3f}"] if dedup.score is not None else [])]
    out.print(" · ".join(decided), highlight=False, markup=False)
    why = dedup.explanation
    if why is None:
        return
    out.print(f"why: {why.summary}", highlight=False, markup=False)
    facts = [
        ("rule", why.rule),
        ("threshold", f"{why.threshold:.3f}, margin {why.margin:.3f}" if why.threshold is not None and why.margin is not None else None),
        ("P(same incident)", f"{why.p_same:.2f}" if why.p_same is not None else None),
        ("matched", _candidate(why.matched)),
        ("best near-verbatim", _candidate(why.best_near_verbatim)),
        ("best paraphrase", _candidate(why.best_paraphrase)),
        ("unreadable", ", ".join(f"{name} {share:.0%}" for name, share in why.unreadable.items()) or None),
    ]
    for label, value in facts:
        if value:
            out.print(f"  {label}: {value}", highlight=False, markup=False)
    for veto in why.vetoed:
        out.print(f"  refused {_candidate(veto)}: {veto.why or 'no reason recorded'}", highlight=False, markup=False)


def _candidate(candidate: DedupCandidate | None) -> str | None:
    if candidate is None:
        return None
    name = "a sealed item" if candidate.item_id is None else f"item {candidate.item_id}"
    scores = [f"{candidate.stage} {candidate.score:.3f}"] if candidate.score is not None else []
    scores += [f"titles {candidate.title_cosine:.3f}"] if candidate.title_cosine is not None else []
    return f"{name} ({', '.join(scores)})" if scores else name
