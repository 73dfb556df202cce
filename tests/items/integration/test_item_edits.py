"""Curators' edits on a real database (every backend): an edit is a revision by its author with a
note, refused edits leave nothing behind, dedup decides an edited text again, a later change at
the source is held beside the curator's text, and the history shows who changed what."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from sqlmodel import Session, col, select

from curation.editing import EditRefused, edit_item, revision_history
from curation.review import ReviewRefused, decide, undo_review
from ingest.mapping import NATIVE_MAPPING
from ingest.normalisation import NORMALISATION_VERSION, content_hash
from ingest.readers import iter_jsonl
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.item import Item, ItemRevision, ItemStatus
from schemas.review import Decision
from schemas.source import Source
from service.sources.ingestion import ingest_records
from tests.support.units import units_of

RECORD = {
    "external_id": "INC-1",
    "occurred_at": "2024-03-01T10:00:00Z",
    "title": "db down",
    "input": "primary db unreachable from <IPV4> after the 10:00 deploy",
    "reference": "rolled back",
    "metadata": {"assignee": "a"},
    "tags": ["db"],
}
QUESTION = "The primary database became unreachable right after a deploy. What is the first thing to check?"
ANSWER = "Whether the deploy changed the database connection settings; roll back if it did."


def _source(session: Session, name: str = "ops", kind: str = "push") -> Source:
    source = Source(name=name, kind=kind)
    session.add(source)
    session.commit()
    return source


def _ingest(session: Session, source: Source, *records: Mapping[str, Any]) -> None:
    body = "\n".join(json.dumps(record) for record in records).encode()
    summary = ingest_records(units=units_of(session), source=source, records=list(iter_jsonl(body)), mapping=NATIVE_MAPPING, actor="test")
    assert summary.rejected == 0, summary.errors


def _item(session: Session, status: ItemStatus = ItemStatus.APPROVED, record: Mapping[str, Any] = RECORD) -> Item:
    source = _source(session)
    _ingest(session, source, record)
    item = session.exec(select(Item)).one()
    item.status = status.value
    session.add(item)
    session.commit()
    return item


def _revisions(session: Session, item_id: int) -> list[ItemRevision]:
    return list(session.exec(select(ItemRevision).where(ItemRevision.item_id == item_id).order_by(col(ItemRevision.id))))


def _edit(session: Session, item_id: int, **fields: Any) -> Item:
    item = edit_item(session=session, item_id=item_id, actor=fields.pop("actor", "token:alice"), note=fields.pop("note", "made gradable"), **fields, now=utcnow())
    session.commit()
    return item


def test_an_edit_is_a_revision_by_its_author_and_sends_the_text_back_to_dedup(session: Session) -> None:
    item = _item(session)
    assert item.id is not None
    digest, before = item.record_digest, item.updated_at
    edited = _edit(session, item.id, title="Database unreachable after a deploy", input=QUESTION, reference=ANSWER, note="  rewritten as a question  ")
    assert (edited.revision, edited.curated_revision, edited.status) == (2, 2, ItemStatus.CANDIDATE.value)
    assert (edited.title, edited.input, edited.reference, edited.tags) == ("Database unreachable after a deploy", QUESTION, ANSWER, ["db"])
    assert (edited.content_hash, edited.hash_recipe) == (content_hash(edited.title, QUESTION, ANSWER), NORMALISATION_VERSION)
    assert edited.record_digest == digest  # the source's record is unchanged: a re-ingest of it changes nothing
    assert edited.updated_at > before
    [revision] = _revisions(session, item.id)
    assert (revision.kind, revision.revision, revision.actor, revision.note) == ("curator", 1, "token:alice", "rewritten as a question")
    assert (revision.previous["input"], revision.previous["status"], revision.previous_digest) == (RECORD["input"], "approved", digest)
    event = session.exec(select(AuditEvent).where(AuditEvent.action == "item.edit")).one()
    assert (event.actor, event.object_id) == ("token:alice", str(item.id))
    assert event.details == {"fields": ["input", "reference", "title"], "note": "rewritten as a question", "revision": 2, "status_before": "approved", "status": "candidate"}
    assert QUESTION not in json.dumps(event.details) and ANSWER not in json.dumps(event.details)

    # The same record again from the source: unchanged, the curator's text stays.
    _ingest(session, session.exec(select(Source)).one(), RECORD)
    session.refresh(edited)
    assert (edited.input, edited.revision, edited.source_changed_at) == (QUESTION, 2, None)


@pytest.mark.parametrize("status", [ItemStatus.UNIQUE, ItemStatus.DUPLICATE, ItemStatus.CONTAMINATED, ItemStatus.APPROVED, ItemStatus.REJECTED, ItemStatus.CANDIDATE])
def test_a_text_edit_sends_every_decided_status_back_to_candidate(session: Session, status: ItemStatus) -> None:
    item = _item(session, status)
    assert item.id is not None
    assert _edit(session, item.id, reference="restored the previous connection string").status == ItemStatus.CANDIDATE.value


def test_a_tags_only_edit_keeps_the_status(session: Session) -> None:
    item = _item(session)
    assert item.id is not None
    hashed = item.content_hash
    edited = _edit(session, item.id, tags=["db", "deploy"])
    assert (edited.status, edited.tags, edited.revision, edited.curated_revision, edited.content_hash) == ("approved", ["db", "deploy"], 2, 2, hashed)


@pytest.mark.parametrize(
    ("status", "fields", "reason", "code"),
    [
        (ItemStatus.UNIQUE, {"input": "x", "note": "   "}, "note_required", 422),
        (ItemStatus.UNIQUE, {"input": "x", "note": "n" * 2001}, "note_required", 422),
        (ItemStatus.UNIQUE, {"title": RECORD["title"], "tags": ["db"]}, "no_change", 422),
        (ItemStatus.UNIQUE, {}, "no_change", 422),
        (ItemStatus.REFERENCE, {"input": "x"}, "reference_item", 409),
        (ItemStatus.RETIRED, {"input": "x"}, "retired", 409),
        (ItemStatus.UNIQUE, {"input": " \n\t"}, "empty_input", 422),
        (ItemStatus.UNIQUE, {"reference": "a\x00b"}, "bad_character", 422),
        (ItemStatus.UNIQUE, {"title": "lone \ud800"}, "bad_character", 422),
    ],
)
def test_refused_edits_change_nothing(session: Session, status: ItemStatus, fields: dict[str, Any], reason: str, code: int) -> None:
    item = _item(session, status)
    assert item.id is not None
    with pytest.raises(EditRefused) as refused:
        edit_item(session=session, item_id=item.id, actor="token:alice", **{"note": "why", **fields}, now=utcnow())
    assert (refused.value.reason, refused.value.status) == (reason, code)
    session.rollback()
    assert _revisions(session, item.id) == []
    assert session.exec(select(AuditEvent).where(AuditEvent.action == "item.edit")).first() is None
    session.refresh(item)
    assert (item.revision, item.curated_revision, item.status) == (1, None, status.value)


def test_an_unknown_item_is_not_found(session: Session) -> None:
    with pytest.raises(EditRefused) as refused:
        edit_item(session=session, item_id=4242, input="x", note="why", actor="token:alice", now=utcnow())
    assert (refused.value.reason, refused.value.status) == ("not_found", 404)


def test_a_source_change_to_an_edited_item_is_held_and_flags_it(session: Session) -> None:
    item = _item(session)
    assert item.id is not None
    source = session.exec(select(Source)).one()
    _edit(session, item.id, input=QUESTION, reference=ANSWER, actor="token:bob", note="question and answer")
    item.status = ItemStatus.APPROVED.value  # as if curated and approved again
    session.add(item)
    session.commit()

    changed = {**RECORD, "input": "primary db unreachable after the 10:00 deploy; failover did not start", "metadata": {"assignee": "b"}}
    _ingest(session, source, changed)
    session.refresh(item)
    assert (item.input, item.reference, item.tags) == (QUESTION, ANSWER, ["db"])  # the curator's text stays
    assert item.meta == {"assignee": "b"}  # the metadata follows the source
    assert (item.status, item.revision, item.curated_revision) == ("unique", 3, 2)  # back to review; the metadata change is revision 3
    held_at = item.source_changed_at  # a local, so the later reads of the refreshed item are not narrowed
    assert held_at is not None
    kinds = [(row.kind, row.revision) for row in _revisions(session, item.id)]
    assert kinds == [("curator", 1), ("source", 2), ("source_held", 3)]
    held = _revisions(session, item.id)[-1]
    assert (held.previous["input"], held.previous["metadata"], held.actor, held.note) == (changed["input"], {"assignee": "b"}, None, None)

    # The same record again: nothing new. A metadata change alone: no held text, no flag.
    _ingest(session, source, changed)
    assert len(_revisions(session, item.id)) == 3
    decide(session=session, item_id=item.id, decision=Decision.APPROVE, reason="", actor="token:carol", now=utcnow())
    session.commit()
    session.refresh(item)
    assert (item.status, item.source_changed_at) == ("approved", None)  # a review decision clears the flag
    _ingest(session, source, {**changed, "metadata": {"assignee": "c"}})
    session.refresh(item)
    assert (item.status, item.source_changed_at, item.meta, item.input) == ("approved", None, {"assignee": "c"}, QUESTION)
    assert [row.kind for row in _revisions(session, item.id)] == ["curator", "source", "source_held", "source"]

    # Another text change is held and flags a rejected item without moving it; an edit clears the flag.
    item.status = ItemStatus.REJECTED.value
    session.add(item)
    session.commit()
    _ingest(session, source, {**changed, "metadata": {"assignee": "c"}, "title": "db down again"})
    session.refresh(item)
    assert (item.status, item.title, item.source_changed_at is not None) == ("rejected", RECORD["title"], True)
    held = _revisions(session, item.id)[-1]
    assert (held.kind, held.previous["title"], held.previous["input"]) == ("source_held", "db down again", changed["input"])
    _edit(session, item.id, title="db down again", note="took the source's new title")
    session.refresh(item)
    assert (item.source_changed_at, item.status, item.title) == (None, "candidate", "db down again")


def test_items_never_edited_follow_their_source_as_before(session: Session) -> None:
    item = _item(session)
    assert item.id is not None
    _ingest(session, session.exec(select(Source)).one(), {**RECORD, "input": "a new text"})
    session.refresh(item)
    assert (item.input, item.status, item.revision, item.source_changed_at) == ("a new text", "candidate", 2, None)
    assert [row.kind for row in _revisions(session, item.id)] == ["source"]


def test_the_history_shows_each_revision_with_its_author_note_and_changes(session: Session) -> None:
    item = _item(session, ItemStatus.UNIQUE)
    assert item.id is not None
    source = session.exec(select(Source)).one()
    _ingest(session, source, {**RECORD, "input": "primary db unreachable"})  # the source changes it: revision 2
    _edit(session, item.id, input=QUESTION, tags=["db", "deploy"], note="a question", actor="token:bob")  # revision 3
    _ingest(session, source, {**RECORD, "input": "primary db unreachable, failover stuck"})  # held at revision 3
    session.refresh(item)
    history = revision_history(session, item)

    def summary(index: int) -> tuple[Any, ...]:
        entry = history[index]
        return (entry.revision, entry.kind, entry.actor, entry.note, [(c.field, c.before, c.after) for c in entry.changes])

    assert len(history) == 4
    assert summary(0) == (1, "source", None, None, [("title", None, "db down"), ("input", None, RECORD["input"]), ("reference", None, "rolled back"), ("tags", None, ["db"])])
    assert summary(1) == (2, "source", None, None, [("input", RECORD["input"], "primary db unreachable")])
    assert summary(2) == (3, "curator", "token:bob", "a question", [("input", "primary db unreachable", QUESTION), ("tags", ["db"], ["db", "deploy"])])
    # What the source proposed, against the text the item had (the curator's), which it kept.
    assert summary(3) == (3, "source_held", None, None, [("input", QUESTION, "primary db unreachable, failover stuck"), ("tags", ["db", "deploy"], ["db"])])
    assert [entry.at for entry in history] == sorted(entry.at for entry in history if entry.at is not None)


def test_an_item_of_a_reference_corpus_is_never_edited(session: Session) -> None:
    source = _source(session, "bench", kind="reference")
    _ingest(session, source, RECORD)
    item = session.exec(select(Item)).one()
    assert item.id is not None and item.status == ItemStatus.REFERENCE.value
    with pytest.raises(EditRefused) as refused:
        edit_item(session=session, item_id=item.id, input="x", note="why", actor="token:alice", now=utcnow())
    assert refused.value.reason == "reference_item"


def _moves(session: Session, item_id: int) -> list[tuple[str, str, str, str]]:
    """The item's audit events that changed its status: (action, actor, before, after)."""
    events = session.exec(select(AuditEvent).where(AuditEvent.object_type == "item", AuditEvent.object_id == str(item_id)).order_by(col(AuditEvent.id))).all()
    moved = [event for event in events if event.details.get("status_before", event.details.get("status")) != event.details.get("status")]
    return [(event.action, event.actor, event.details["status_before"], event.details["status"]) for event in moved]


def test_a_source_change_that_moves_a_reviewed_item_is_audited_and_ends_its_undo(session: Session) -> None:
    item = _item(session, ItemStatus.UNIQUE)
    assert item.id is not None
    source = session.exec(select(Source)).one()
    _edit(session, item.id, input=QUESTION, reference=ANSWER, actor="token:bob", note="question and answer")
    item.status = ItemStatus.UNIQUE.value  # as if curated again
    session.add(item)
    decide(session=session, item_id=item.id, decision=Decision.APPROVE, reason="", actor="token:bob", now=utcnow())
    session.commit()
    _ingest(session, source, {**RECORD, "input": "primary db unreachable; failover did not start"})
    session.refresh(item)
    assert item.status == "unique"
    assert _moves(session, item.id) == [
        ("item.edit", "token:bob", "unique", "candidate"),
        ("item.approve", "token:bob", "unique", "approved"),
        ("item.source_reopen", "source:ops", "approved", "unique"),
    ]
    # The approval was overtaken by the source: there is nothing to undo, and the refusal says why.
    with pytest.raises(ReviewRefused, match=r"item\.source_reopen") as refused:
        undo_review(session=session, item_id=item.id, actor="token:bob", now=utcnow())
    assert refused.value.reason == "not_reviewed"


def test_a_source_change_to_an_approved_item_sends_it_back_to_curation_on_the_record(session: Session) -> None:
    item = _item(session, ItemStatus.UNIQUE)
    assert item.id is not None
    decide(session=session, item_id=item.id, decision=Decision.APPROVE, reason="", actor="token:bob", now=utcnow())
    session.commit()
    _ingest(session, session.exec(select(Source)).one(), {**RECORD, "input": "a new text"})
    session.refresh(item)
    assert item.status == "candidate"
    assert _moves(session, item.id) == [("item.approve", "token:bob", "unique", "approved"), ("item.source_change", "source:ops", "approved", "candidate")]
