"""The `goldenset item` group: `edit`, a curator's edit of an item as a new revision, and
`revisions`, an item's history with what each revision changed (registered by
`service.items.cli`).

An item in (or bound for) an eval's sealed slice is edited, and its history shown with its text,
only when asked for by name with `--sealed`, and such a read is audited as the API audits it.

Exit status: 0 when done, 3 when an edit is refused (the reason is printed), 2 on bad usage.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from sqlmodel import Session

from curation.editing import EditRefused, edit_item, item_revisions
from schemas.common import MAX_ROW_ID
from schemas.item import FieldChange, ItemEdit, ItemRevisions, ItemStatus
from service.core.audit import record_read
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, EXIT_REJECTED, fail, open_engine, out

item_app = typer.Typer(help="Edit items, and show what each revision changed.", no_args_is_help=True)
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

    Exit status: 0 when edited, 3 when refused (the reason is printed), 2 on bad usage."""
    try:
        data = ItemEdit(title=title, input=_text_file(input_file, "input"), reference=_text_file(reference_file, "reference"), tags=tag or None, note=note)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors())
        raise fail(problems) from exc
    engine = open_engine()
    try:
        with write_transaction(engine) as session:
            if _is_sealed(session, item) and not sealed:
                raise fail(f"item {item} is in (or bound for) an eval's sealed slice: pass --sealed to edit it")
            edited = edit_item(
                session=session, item_id=item, title=data.title, input=data.input, reference=data.reference, tags=data.tags, note=data.note, actor=CLI_ACTOR
            )
            revision, status = edited.revision, edited.status
    except EditRefused as exc:
        raise fail(f"refused ({exc.reason}): {exc.detail}", EXIT_REJECTED) from exc
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
        action = "item.sealed_revisions_read" if is_sealed else "item.revisions_read"
        record_read(engine, actor=CLI_ACTOR, action=action, endpoint="goldenset item revisions", object_type="item", object_id=None, item_ids=[item])
    if as_json:
        typer.echo(history.model_dump_json(indent=2))
        return
    _print_revisions(history, shown=sealed)
