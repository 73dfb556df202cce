"""Items as readers see them: lookups, pages, read models with sealed content withheld, how dedup
judged an item, and the items dedup finds most like one.

An item in (or bound for) a sealed slice (`curation.releases.visibility`) is shown without its
content (`sealed: true`; external id, text fields, metadata and tags empty): sealed content is
served only by budgeted sealed reads and sealed runs.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from fastapi import Request
from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from curation.dedup.overrides import overrides_of
from curation.dedup.similarity import Similar
from schemas.dedup import DedupCandidate, DedupDecision, DedupExplanation, DedupRead, SimilarRead
from schemas.item import Item, ItemDetail, ItemRead, ItemStatus
from schemas.source import Source
from service.core.audit import audit_content_read
from service.core.auth import Principal
from service.core.cursors import decode_time_id_cursor, encode_cursor
from service.core.problems import ProblemError
from service.items.shaping import ShownItem, shape_item, shape_items, withheld

CURSOR_KIND = "items"


def require_item(session: Session, item_id: int) -> tuple[Item, str]:
    """The item and its source's name, or a 404 problem."""
    row = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(Item.id == item_id)).first()
    if row is None:
        raise ProblemError(404, "Not Found", f"no item with id {item_id}")
    return row[0], row[1]


def shown_item(session: Session, item_id: int, *, secret_key: str) -> tuple[Item, ShownItem]:
    """The item (a 404 problem when there is none) and the item as an API reader may see it
    (`service.items.shaping`: no API token reads a sealed item's content through `/v1/items`)."""
    item, source = require_item(session, item_id)
    return item, shape_item(session=session, item=item, source=source, secret_key=secret_key)


def answer_after_write(request: Request, principal: Principal, session: Session, item_id: int, *, secret_key: str) -> ItemRead:
    """The item as it is after a write (a review decision, a ruling) in the request's unit of work
    (`service.core.deps`), shaped for the reader, with its content read audited when it carries
    content (written once the unit of work is committed and its connection returned)."""
    _item, shown = shown_item(session, item_id, secret_key=secret_key)
    if not shown.withheld:
        audit_content_read(request, principal, [item_id])
    return shown.read()


def item_detail(session: Session, item_id: int, *, secret_key: str) -> ItemDetail:
    """The item as `GET /v1/items/{id}` and `goldenset item show` show it, with how dedup judged
    it and why, and the rulings naming it (a 404 problem when there is none); a sealed item
    without its content, dedup explanation or rulings."""
    item, shown = shown_item(session, item_id, secret_key=secret_key)
    return ItemDetail(
        **shown.read().model_dump(),
        dedup=dedup_read(session, item, secret_key=secret_key, sealed=shown.withheld),
        overrides=[] if shown.withheld else overrides_of(session, item_id),
        curated_revision=shown.curated_revision,
        source_changed_at=shown.source_changed_at,
    )


def item_page(
    *,
    session: Session,
    secret_key: str,
    source: str | None = None,
    status: ItemStatus | None = None,
    occurred_after: datetime | None = None,
    occurred_before: datetime | None = None,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[ShownItem], str | None]:
    """One page of items with their source names, newest incident first (ties: higher id first),
    and the cursor of the next page (None on the last). Items in (or bound for) a sealed slice are
    left out, so neither a page, nor its filters, nor its cursor tells anything of them; a page can
    therefore hold fewer than `limit` items before the last one."""
    query = select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id))
    if source is not None:
        query = query.where(Source.name == source)
    if status is not None:
        query = query.where(Item.status == status.value)
    if occurred_after is not None:
        query = query.where(col(Item.occurred_at) >= occurred_after)
    if occurred_before is not None:
        query = query.where(col(Item.occurred_at) < occurred_before)
    if cursor:
        at, item_id = decode_time_id_cursor(cursor, CURSOR_KIND, secret_key=secret_key)
        query = query.where(or_(col(Item.occurred_at) < at, and_(col(Item.occurred_at) == at, col(Item.id) < item_id)))
    rows = session.exec(query.order_by(col(Item.occurred_at).desc(), col(Item.id).desc()).limit(limit + 1)).all()
    page = [(item, name) for item, name in rows[:limit]]
    last = page[-1][0] if len(rows) > limit else None
    next_cursor = encode_cursor(CURSOR_KIND, last.occurred_at.isoformat(), last.id, secret_key=secret_key) if last is not None and last.id is not None else None
    return [shown for shown in shape_items(session=session, rows=page, secret_key=secret_key) if not shown.withheld], next_cursor


def dedup_read(session: Session, item: Item, *, secret_key: str, sealed: bool = False) -> DedupRead:
    """How dedup judged `item`: its newest decision, with the cluster root it points at now (an
    earlier incident arriving later can move it) and why (`explain_decision`; the items of a
    sealed slice it names are not named); just the status while it is a candidate, has never been
    judged (a reference item), or is sealed (its matches would name what it is like)."""
    if sealed or item.status == ItemStatus.CANDIDATE.value:
        return DedupRead(status=item.status)
    decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item.id).order_by(col(DedupDecision.id).desc()).limit(1)).first()
    if decision is None:
        return DedupRead(status=item.status, duplicate_of=item.duplicate_of)
    hidden = withheld(session=session, item_ids=named_items([decision]), secret_key=secret_key)
    explanation = explain_decision(decision, hidden=hidden)
    return DedupRead(status=decision.status, duplicate_of=item.duplicate_of, stage=decision.stage, score=decision.score, decided_at=decision.decided_at, explanation=explanation)


def named_items(decisions: Iterable[DedupDecision]) -> set[int]:
    """Every item the decisions name (matched, runner-ups, vetoed, kept over, ruled apart from):
    those to check against the sealed slices before `explain_decision`."""
    named: set[int] = set()
    for decision in decisions:
        details = decision.details or {}
        found = [decision.matched_item_id, *(details.get(key) for key in ("matched_item", "kept_over", "ruled_apart_from", "earlier_incident_arrived"))]
        found += [entry.get("item") for key in ("best_jaccard", "best_embedding") if isinstance(entry := details.get(key), dict)]
        found += [entry.get("item") for entry in _entries(details.get("vetoed"))]
        named |= {item_id for item_id in found if isinstance(item_id, int) and not isinstance(item_id, bool)}
    return named - {decision.item_id for decision in decisions}


def explain_decision(decision: DedupDecision, *, hidden: Collection[int] = ()) -> DedupExplanation:
    """Why `decision` is as it is, from its stored details (`curation.dedup.rules` writes them;
    older decisions and rulings hold fewer, and what is missing stays empty). `hidden`: the items
    the reader may not see (in or bound for a sealed slice: `service.items.shaping.withheld`):
    they are named "a sealed item", without their id, the words of a veto's reason or their
    unreadable shares. The caller gives no explanation at all of an item shown without its content."""
    details = decision.details or {}
    hidden = set(hidden)
    score, margin = decision.score, _number(details.get("margin"))
    threshold = round(score - margin, 4) if score is not None and margin is not None else None
    matched_id = decision.matched_item_id if decision.matched_item_id is not None else _int(details.get("matched_item"))
    best_jaccard, best_embedding = _mapping(details.get("best_jaccard")), _mapping(details.get("best_embedding"))
    matched = None
    if matched_id is not None:
        title_cosine = _number(best_embedding.get("title_cosine")) if best_embedding.get("item") == matched_id else None
        matched = _candidate(matched_id, hidden, stage=decision.stage, score=score, title_cosine=title_cosine)
    explanation = DedupExplanation(
        summary="",
        rule=_text(details.get("rule")),
        stage=decision.stage,
        score=score,
        threshold=threshold,
        margin=margin,
        p_same=_number(details.get("p_same")),
        features=_numbers(details.get("features")),
        matched=matched,
        best_near_verbatim=_candidate(_int(best_jaccard.get("item")), hidden, stage="minhash", score=_number(best_jaccard.get("score"))),
        best_paraphrase=_candidate(
            _int(best_embedding.get("item")), hidden, stage="embedding", score=_number(best_embedding.get("cosine")), title_cosine=_number(best_embedding.get("title_cosine"))
        ),
        vetoed=[veto for entry in _entries(details.get("vetoed")) if (veto := _veto(entry, hidden)) is not None],
        unreadable=_numbers(details.get("unreadable")),
        read_as_characters=_numbers(details.get("read_as_characters")),
        kept_over=_candidate(_int(details.get("kept_over")), hidden),
        ruled_apart_from=_candidate(_int(details.get("ruled_apart_from")), hidden),
        ruled_by=_text(details.get("actor")) if decision.stage == "override" else None,
        thresholds=_numbers(details.get("thresholds")),
        rules_version=_text(details.get("rules")),
    )
    ruled_about = explanation.ruled_apart_from or explanation.matched
    # A ruling's note is what a person wrote about the pair: it may describe a sealed item.
    note = _text(details.get("note")) if decision.stage == "override" and not (ruled_about and ruled_about.sealed) else None
    explanation = explanation.model_copy(update={"note": note})
    return explanation.model_copy(update={"summary": _summary(decision, explanation, earlier=_int(details.get("earlier_incident_arrived")) is not None)})


def _summary(decision: DedupDecision, why: DedupExplanation, *, earlier: bool) -> str:
    """The explanation in words: what was decided and on what evidence."""
    other = _name(why.matched)
    if decision.stage == "override":
        if why.ruled_apart_from is not None:
            said = f"A person ({why.ruled_by or 'unknown'}) ruled it not a duplicate of {_name(why.ruled_apart_from)}."
        elif why.matched is not None:
            said = f"A person ({why.ruled_by or 'unknown'}) ruled it a duplicate of {other}." if why.ruled_by else f"Kept a duplicate of {other}, as a person ruled it."
        else:
            said = "A person ruled on it."
        return said + (f" Note: {why.note}" if why.note else "")
    sentences: list[str] = []
    kind = "Contaminated: it matches the reference item" if decision.status == ItemStatus.CONTAMINATED.value else "Duplicate of"
    if why.matched is not None and earlier and why.margin is None:
        sentences.append(f"{kind} {other}: an earlier report of the same incident that arrived later, matched by the {why.rule or 'fresh'} rule.")
    elif why.matched is not None and why.rule == "exact":
        sentences.append(f"{kind} {other}: the same text once normalised (exact rule).")
    elif why.matched is not None:
        cleared = f", cleared the threshold {why.threshold:.3f} by {why.margin:.3f}" if why.threshold is not None and why.margin is not None else ""
        score = f"{_MEASURES.get(why.stage or '', 'score')} {why.score:.3f}" if why.score is not None else "a score not recorded"
        title = f" (titles {why.matched.title_cosine:.3f})" if why.matched.title_cosine is not None else ""
        sentences.append(f"{kind} {other} by the {why.rule or 'unnamed'} rule at the {why.stage} stage: {score}{title}{cleared}.")
    else:
        sentences.append("Unique: no earlier item was close enough." if not why.vetoed else "Unique: every close enough match was refused.")
    if why.p_same is not None:
        sentences.append(f"P(same incident) {why.p_same:.2f}.")
    asked = decision.details.get("asked")
    if isinstance(asked, dict):
        ruled = "a duplicate" if asked.get("rules_outcome") == "duplicate" else "unique"
        sentences.append(f"The rules said {ruled} and the same-incident judge disagrees: a curator is asked (dedup questions), and it stays unique until answered.")
    if why.read_as_characters:
        sentences.append("Matched by characters where the model cannot read the text: " + ", ".join(f"{name} {value:.2f}" for name, value in why.read_as_characters.items()) + ".")
    if why.kept_over is not None:
        sentences.append(f"It was kept over {_name(why.kept_over)}, a later report of the same incident.")
    for veto in why.vetoed:
        sentences.append(f"Refused {_name(veto)} ({veto.stage}{f' {veto.score:.3f}' if veto.score is not None else ''}): {veto.why or 'no reason recorded'}.")
    if why.matched is None:
        runner_ups = [
            f"{label} {_name(found)} at {found.score:.3f}"
            for label, found in (("near-verbatim", why.best_near_verbatim), ("paraphrase", why.best_paraphrase))
            if found is not None and found.score is not None
        ]
        if runner_ups:
            sentences.append("Closest: " + "; ".join(runner_ups) + ".")
    if why.unreadable:
        sentences.append("The model cannot read its " + " or ".join(f"{name} ({share:.0%})" for name, share in why.unreadable.items()) + ": embeddings there are no evidence.")
    return " ".join(sentences)


_MEASURES = {"minhash": "Jaccard", "embedding": "body cosine", "characters": "character similarity", "exact": "score"}


def _name(candidate: DedupCandidate | None) -> str:
    if candidate is None:
        return "no item"
    return "a sealed item" if candidate.sealed or candidate.item_id is None else f"item {candidate.item_id}"


def _candidate(
    item_id: int | None,
    hidden: set[int],
    *,
    stage: str | None = None,
    score: float | None = None,
    title_cosine: float | None = None,
    why: str | None = None,
    unreadable: dict[str, float] | None = None,
) -> DedupCandidate | None:
    """The candidate as the reader may see it (None when no item is named)."""
    if item_id is None:
        return None
    if item_id in hidden:
        kind = re.split(r"[:(]", why, maxsplit=1)[0].strip() if why else None
        return DedupCandidate(item_id=None, sealed=True, stage=stage, score=score, title_cosine=title_cosine, why=kind)
    return DedupCandidate(item_id=item_id, stage=stage, score=score, title_cosine=title_cosine, why=why, unreadable=unreadable or {})


def _veto(entry: Mapping[str, Any], hidden: set[int]) -> DedupCandidate | None:
    why, unreadable = _text(entry.get("why")), _numbers(entry.get("unreadable"))
    return _candidate(_int(entry.get("item")), hidden, stage=_text(entry.get("stage")), score=_number(entry.get("score")), why=why, unreadable=unreadable)


def _entries(value: Any) -> list[Mapping[str, Any]]:
    return [entry for entry in value if isinstance(entry, Mapping)] if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _numbers(value: Any) -> dict[str, float]:
    return {str(key): float(number) for key, number in value.items() if _number(number) is not None} if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def similar_reads(*, session: Session, ranked: Sequence[Similar], secret_key: str) -> list[SimilarRead]:
    """The ranked items as the API shows them, best first. Items in (or bound for) a sealed slice
    are left out (their ids and scores would confirm a guess at their text), as are items deleted
    since the index was built."""
    ids = [entry.item_id for entry in ranked]
    rows = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(ids))).all()
    shown = {item.id: item for item in shape_items(session=session, rows=list(rows), secret_key=secret_key) if not item.withheld}
    return [_similar_read(entry, shown[entry.item_id]) for entry in ranked if entry.item_id in shown]


def _similar_read(entry: Similar, item: ShownItem) -> SimilarRead:
    fields = {"id": item.id, "external_id": item.external_id, "source": item.source, "title": item.title, "occurred_at": item.occurred_at, "status": item.status}
    return SimilarRead.model_validate(asdict(entry) | fields)
