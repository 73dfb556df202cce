"""What the release pages show: the dev items of a release and the difference between two releases
of an eval, with sealed items reduced to counts for people without the `sealed` scope.

A diff compares the item sets of two releases (either order): `added` holds the items of the
release compared to (`b`) that the first (`a`) lacks, `retired` the items of `a` that `b` lacks,
and `withheld` the members the writer left out of `b` only while they wait for review again
(`Release.diff["withheld"]`). Each entry says why it arrived or left, from the eval's membership
rows (`EvalItem`: first release, retired release and reason). Titles come from the content the
releases froze, and only for items outside every sealed slice
(`curation.releases.visibility`); entries are listed up to `LISTED` a section, the rest counted.
The view also sets the two releases' recorded compositions side by side, the newer one's linking
core, and how many dev items both hold (`service.ui.release_composition`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func
from sqlmodel import Session, col, select

from curation.releases.periods import Period
from curation.releases.writer import admissible, rotation_policy
from schemas.evals import Eval, EvalItem, RetireReason, Split
from schemas.item import Item
from schemas.release import LinkingCore, Release, ReleaseItem
from schemas.source import Source
from service.items.shaping import withheld
from service.ui.release_composition import DimensionTable, composition_of, linking_of, tables

LISTED = 500
"""Entries listed in one section of a diff, or on one page of a release's dev items; the rest are counted."""

CHUNK = 2_000
"""Ids asked about in one query."""

REASONS = {
    RetireReason.AGED_OUT.value: "aged out: older than the maximum age, or before the eval's earliest date",
    RetireReason.EXPOSED.value: "exposed: sent to an endpoint that may train on it",
    RetireReason.DISPLACED.value: "displaced: no place left (target size, a source quota or the balance of the composition)",
    RetireReason.REJECTED.value: "rejected in review",
    RetireReason.DUPLICATE.value: "found to duplicate another item",
    RetireReason.CONTAMINATED.value: "found in public data (contaminated)",
    RetireReason.WITHDRAWN.value: "withdrawn from curation",
}


@dataclass(frozen=True)
class Entry:
    """One listed item: `title` and `occurred_at` are None when its content is not shown."""

    item_id: int
    split: str
    why: str
    title: str | None = None
    occurred_at: datetime | None = None


@dataclass
class Section:
    """A section of a diff: its items counted by split; `listed` entries, and those counted only
    (`sealed_hidden`: sealed, for a person without the `sealed` scope; `unlisted`: past LISTED)."""

    listed: list[Entry] = field(default_factory=list)
    dev: int = 0
    sealed: int = 0
    sealed_hidden: int = 0
    unlisted: int = 0

    @property
    def count(self) -> int:
        return self.dev + self.sealed


@dataclass
class DiffView:
    a: Release
    b: Release
    added: Section
    retired: Section
    withheld: Section
    not_taken: int
    shown: list[int]
    """The ids whose frozen content (title, date) the view shows: the page audits their read."""
    composition: list[DimensionTable] = field(default_factory=list)
    """Both releases' recorded shares, `a` then `b` (empty when neither recorded them)."""
    dev_in_both: int = 0
    """Items both releases hold in their dev split."""
    linking: LinkingCore | None = None
    """The newer release's linking core, when it was written right after the older one."""

    @property
    def forward(self) -> bool:
        return self.a.number < self.b.number


def splits_of(session: Session, release: Release) -> dict[int, tuple[str, datetime]]:
    """Item id -> (split, incident date) of every item of the release (no content read)."""
    rows = session.exec(select(ReleaseItem.item_id, ReleaseItem.split, ReleaseItem.occurred_at).where(ReleaseItem.release_id == release.id)).all()
    return {item_id: (split, occurred_at) for item_id, split, occurred_at in rows}


def frozen_titles(session: Session, release_ids: Collection[int], item_ids: Collection[int]) -> dict[int, tuple[str, datetime | None]]:
    """Title and incident date of each item as the newest of `release_ids` holding it froze them."""
    if not item_ids or not release_ids:
        return {}
    rows = session.exec(
        select(ReleaseItem.item_id, ReleaseItem.content, ReleaseItem.occurred_at)
        .where(col(ReleaseItem.release_id).in_(sorted(release_ids)), col(ReleaseItem.item_id).in_(sorted(item_ids)))
        .order_by(col(ReleaseItem.release_id))
    ).all()
    found: dict[int, tuple[str, datetime | None]] = {}
    for item_id, content, occurred_at in rows:
        try:
            title = str(json.loads(content).get("title", ""))
        except ValueError:
            title = ""
        found[item_id] = (title, occurred_at)
    return found


def sealed_elsewhere(session: Session, dev_ids: Sequence[int], *, secret_key: str) -> set[int]:
    """Those of `dev_ids` (items released as dev) that must still be shown without content
    (`service.items.reads.withheld`), asked in chunks that every backend's bound parameters allow."""
    hidden: set[int] = set()
    for start in range(0, len(dev_ids), CHUNK):
        hidden |= withheld(session=session, item_ids=dev_ids[start : start + CHUNK], secret_key=secret_key)
    return hidden


def _arrival(member: EvalItem | None, older: Release, newer: Release) -> str:
    """Why an item of `newer` is missing from `older`."""
    if member is None:
        return "not a member of the eval"
    if member.first_release > older.number:
        return f"new in release {member.first_release}"
    if member.item_id in older.diff.get("withheld", []):
        return f"withheld from release {older.number} (waiting for review again), back since"
    return "back after being left out"


def _departure(member: EvalItem | None, older: Release, newer: Release) -> str:
    """Why an item of `older` is missing from `newer`."""
    if member is None:
        return "not a member of the eval"
    if member.retired_release is not None and older.number < member.retired_release <= newer.number:
        reason = member.retired_reason or ""
        return f"retired at release {member.retired_release}: {REASONS.get(reason, reason)}"
    if member.item_id in newer.diff.get("withheld", []):
        return f"withheld from release {newer.number} (waiting for review again)"
    return "left out"


def _section(ids: dict[int, tuple[str, datetime]], why: Callable[[int], str], *, may_see_sealed: bool, hidden_anyway: set[int]) -> Section:
    """Count `ids` by split and list up to LISTED of them, newest incident first; sealed entries
    are listed (without content) only for people with the `sealed` scope."""
    section = Section()
    for item_id, (split, _) in sorted(ids.items(), key=lambda entry: (-entry[1][1].timestamp(), -entry[0])):
        sealed = split == Split.SEALED.value or item_id in hidden_anyway
        if sealed:
            section.sealed += 1
        else:
            section.dev += 1
        if sealed and not may_see_sealed:
            section.sealed_hidden += 1
        elif len(section.listed) >= LISTED:
            section.unlisted += 1
        else:
            section.listed.append(Entry(item_id=item_id, split=Split.SEALED.value if sealed else Split.DEV.value, why=why(item_id)))
    return section


def _with_titles(session: Session, section: Section, release_ids: Collection[int]) -> list[int]:
    """Fill in the title and date of the section's listed dev entries from the newest of
    `release_ids` holding each; return their ids."""
    ids = [entry.item_id for entry in section.listed if entry.split == Split.DEV.value]
    titles = frozen_titles(session, release_ids, ids)
    section.listed = [Entry(entry.item_id, entry.split, entry.why, *titles.get(entry.item_id, ("", None))) if entry.split == Split.DEV.value else entry for entry in section.listed]
    return ids


def diff_releases(session: Session, *, evaluation: Eval, a: Release, b: Release, may_see_sealed: bool, secret_key: str) -> DiffView:
    """The difference from release `a` to release `b` of `evaluation` (see the module docstring)."""
    older, newer = (a, b) if a.number <= b.number else (b, a)
    in_a, in_b = splits_of(session, a), splits_of(session, b)
    withheld_ids = sorted(set(b.diff.get("withheld", [])))
    added = {item_id: value for item_id, value in in_b.items() if item_id not in in_a}
    retired = {item_id: value for item_id, value in in_a.items() if item_id not in in_b and item_id not in withheld_ids}
    involved = set(added) | set(retired) | set(withheld_ids)
    members = {member.item_id: member for member in session.exec(select(EvalItem).where(EvalItem.eval_id == evaluation.id)).all() if member.item_id in involved}
    dates = dict(session.exec(select(Item.id, Item.occurred_at).where(col(Item.id).in_(withheld_ids))).all()) if withheld_ids else {}
    held = {item_id: (members[item_id].split if item_id in members else Split.SEALED.value, dates.get(item_id, b.period_start)) for item_id in withheld_ids}
    # A dev row is hidden too when another eval holds the item sealed (releases written before one split per item).
    dev_ids = [item_id for item_id, (split, _) in (added | retired | held).items() if split == Split.DEV.value]
    hidden_anyway = sealed_elsewhere(session, dev_ids, secret_key=secret_key)

    def arrived(item_id: int) -> str:
        return _arrival(members.get(item_id), older, newer) if a is older else _departure(members.get(item_id), older, newer)

    def left(item_id: int) -> str:
        return _departure(members.get(item_id), older, newer) if a is older else _arrival(members.get(item_id), older, newer)

    def waiting(item_id: int) -> str:
        return "waiting for review again: its content changed after it was released"

    view = DiffView(
        a=a,
        b=b,
        added=_section(added, arrived, may_see_sealed=may_see_sealed, hidden_anyway=hidden_anyway),
        retired=_section(retired, left, may_see_sealed=may_see_sealed, hidden_anyway=hidden_anyway),
        withheld=_section(held, waiting, may_see_sealed=may_see_sealed, hidden_anyway=hidden_anyway),
        not_taken=not_taken(session, evaluation=evaluation, release=b),
        shown=[],
        composition=tables([composition_of(a), composition_of(b)]),
        dev_in_both=sum(split == Split.DEV.value and in_b.get(item_id, ("",))[0] == Split.DEV.value for item_id, (split, _) in in_a.items()),
    )
    core = linking_of(newer)
    if core is not None and core.previous_release == older.number and older.number != newer.number:
        view.linking = core
    before_b = [release_id for release_id in session.exec(select(Release.id).where(Release.eval_id == evaluation.id, Release.number < b.number)).all() if release_id is not None]
    assert a.id is not None and b.id is not None
    view.shown = _with_titles(session, view.added, [b.id]) + _with_titles(session, view.retired, [a.id]) + _with_titles(session, view.withheld, before_b)
    return view


def not_taken(session: Session, *, evaluation: Eval, release: Release) -> int:
    """How many items admitted now (approved; unique too under auto-approval) from the eval's
    sources, inside the window of the release's period under the eval's current settings and
    never exposed, are not in the release and were not members when it was written: left out by
    the target size or a source quota, or admitted after it was written."""
    policy = rotation_policy(evaluation, Period(start=release.period_start, end=release.period_end))
    earlier_members = select(EvalItem.item_id).where(EvalItem.eval_id == evaluation.id, EvalItem.first_release <= release.number)
    query = select(func.count()).select_from(Item).join(Source, col(Source.id) == col(Item.source_id)).where(*admissible(evaluation, policy, excluding=earlier_members))
    return int(session.exec(query).one())


@dataclass(frozen=True)
class DevPage:
    """One page of a release's dev items, newest incident first, as `Entry` rows with titles."""

    entries: list[Entry]
    total: int
    offset: int


def dev_items(session: Session, *, release: Release, offset: int, secret_key: str) -> DevPage:
    """The release's dev items that may be served (those of `service.evals.releases.release_rows`,
    in its order) from `offset`, up to LISTED, with the titles and dates the release froze."""
    rows = session.exec(
        select(ReleaseItem.item_id)
        .where(ReleaseItem.release_id == release.id, ReleaseItem.split == Split.DEV.value)
        .order_by(col(ReleaseItem.occurred_at).desc(), col(ReleaseItem.item_id).desc())
    ).all()
    hidden = sealed_elsewhere(session, list(rows), secret_key=secret_key)
    visible = [item_id for item_id in rows if item_id not in hidden]
    assert release.id is not None
    ids = visible[offset : offset + LISTED]
    titles = frozen_titles(session, [release.id], ids)
    entries = [Entry(item_id, Split.DEV.value, "", *titles.get(item_id, ("", None))) for item_id in ids]
    return DevPage(entries=entries, total=len(visible), offset=offset)
