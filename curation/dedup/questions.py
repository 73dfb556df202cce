"""The third dedup outcome: ask a curator.

The rules (`curation.dedup.rules`) decide duplicate or unique. Where their two weakest calls meet
a same-incident judge (`curation.dedup.judge`: P that a pair is one incident, from the pair's
features, `curation.dedup.pair_features`) that disagrees, curation asks instead of deciding:

- (a) the rules merged a fresh item as a paraphrase (rule `fresh`, stage `embedding` or
  `characters`: the rules with the poorest precision on a new pool) but P is below
  `DedupConfig.confirm_threshold`;
- (b) the rules kept an item unique, but it is near an earlier item (a near link at the
  recall-first level, `Verdict.links`) whose P is at or above `DedupConfig.ask_threshold`.

A source's open questions are bounded (`DedupConfig.ask_share` of its items): once the queue is
that long, nothing more is asked of the source, and the rules decide alone, until curators answer.

An asked item stays `unique` (nothing scarce is thrown away) and holds an open question about the
pair; its near link already keeps both items on one side of a release's split, and releases take
no item with an open question until it is answered (`curation.releases.writer.admissible`). The
answer (`curation.dedup.answers`) is an ordinary ruling. Machine-written text (log lines, alerts),
pairs a person ruled apart and items ruled by hand are never asked about.

Curators' answers refit the judge per source (`curation.dedup.judge.refit`): once a source has
enough answered questions, P for its pairs is the refitted one, so asking follows what that
source's curators ruled. Each question keeps the shipped judge's P (`evidence.shipped_p`) and the
features, which is what a refit reads; a refit is made once per curation batch and source.

When the judge's model cannot be loaded, no question is asked and the rules decide as before
(logged once); so too when curation embeds with another model than the one whose cosines the
shipped judge was fitted on (`JUDGE_EMBEDDINGS`, its DATA_CARD.md): its P would mean nothing. Only
the judge's public `load()` and `probability(features)` are used, so a new model file of another
format plugs in by itself.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from sqlalchemy import func
from sqlmodel import Session, col, select

from curation.dedup.fingerprints import MinHashRecipe
from curation.dedup.identifiers import distinction
from curation.dedup.index import SimilarityIndex
from curation.dedup.judge.refit import Refit, Ruling, refit
from curation.dedup.near_links import NearLinkTo
from curation.dedup.pair_features import PairScores, PairText, pair_features
from curation.dedup.readability import Unreadable
from curation.dedup.rule_evidence import Facts, display_title
from curation.dedup.rules import DedupConfig, Verdict
from curation.dedup.text_kind import TextKind
from schemas.dedup import DedupStage
from schemas.dedup_questions import DedupQuestion, QuestionRuling, QuestionState
from schemas.item import Item, ItemStatus

logger = logging.getLogger(__name__)

PARAPHRASE_STAGES = (DedupStage.EMBEDDING.value, DedupStage.CHARACTERS.value)
"""The stages of a fresh merge the judge must confirm."""
FIELD_LENGTH = 80
"""Metadata values longer than this (descriptions, URLs) are no field to compare."""
_CONFLICTS = {
    "conflict_version": "another version or number",
    "conflict_cve": "another CVE",
    "conflict_name": "another issue key, module, code or configuration name",
    "conflict_host": "another host",
}


class Judge(Protocol):
    """What asking needs of a same-incident judge (`curation.dedup.judge.SameIncidentJudge`)."""

    def probability(self, features: Mapping[str, float]) -> float:
        """P(the pair whose features these are is one incident)."""


JUDGE_EMBEDDINGS = "all-minilm-l6-v2"
"""The embedding model whose cosines the shipped judge weighs (curation/dedup/judge/DATA_CARD.md),
as it appears in an encoder's model id (any backend, or an embedding server serving it)."""
_JUDGES: dict[str, Judge | None] = {}
_OTHER_MODELS: set[str] = set()
_JUDGES_LOCK = threading.Lock()


def load_judge(path: str | Path | None = None) -> Judge | None:
    """The same-incident judge of the model file at `path` (default: the one shipped with
    `curation.dedup.judge`), loaded once per path; None when the file is missing or cannot be
    loaded, which is logged once: curation then asks no questions."""
    key = str(path) if path is not None else ""
    with _JUDGES_LOCK:
        if key not in _JUDGES:
            try:
                from curation.dedup.judge import SameIncidentJudge

                _JUDGES[key] = SameIncidentJudge.load(path)
            except Exception as exc:  # any failure to load leaves the rules deciding alone
                logger.warning("the same-incident judge cannot be loaded (%s): curation asks no dedup questions, the rules decide alone", exc)
                _JUDGES[key] = None
        return _JUDGES[key]


def judge_for(model_id: str) -> Judge | None:
    """The shipped judge (`load_judge`) for curation embedding with `model_id`; None when it cannot
    be loaded, or when `model_id` is not the model it was fitted on (logged once per model)."""
    if JUDGE_EMBEDDINGS not in model_id.lower():
        with _JUDGES_LOCK:
            if model_id not in _OTHER_MODELS:
                _OTHER_MODELS.add(model_id)
                logger.warning("curation embeds with %s, not the model the same-incident judge was fitted on (%s): it asks no dedup questions", model_id, JUDGE_EMBEDDINGS)
        return None
    return load_judge()


@dataclass(frozen=True)
class Asked:
    """A question curation asks about `item` and the earlier item `other`: the judge's `p_same`,
    what the rules decided (`rules_outcome`: `duplicate` or `unique`) and the `evidence` (rule,
    stage, score, threshold, pair features, title differences)."""

    other: int
    p_same: float
    rules_outcome: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def link(self) -> NearLinkTo:
        """The near link that keeps the pair on one side of a release's split."""
        return NearLinkTo(self.other, str(self.evidence.get("stage") or DedupStage.EMBEDDING.value), self.evidence.get("score"))


@dataclass(frozen=True)
class Pair:
    """What a question weighs of the item being decided: its row, vectors and unreadable shares."""

    item: Item
    body: Any
    title: Any
    unreadable: Unreadable
    kind: TextKind


class Questioner:
    """Decides whether a verdict is asked (`consider`) and keeps the open questions of the items
    decided (`record`), in one curation batch's session."""

    def __init__(self, judge: Judge | None, config: DedupConfig, recipe: MinHashRecipe) -> None:
        self.judge = judge
        self.config = config
        self.recipe = recipe
        self._failed = False

    @property
    def asks(self) -> bool:
        return self.judge is not None and not self._failed

    def consider(self, pair: Pair, verdict: Verdict, *, index: SimilarityIndex, facts: Facts, session: Session) -> Asked | None:
        """The question to ask about `pair.item` decided by `verdict`, or None (no judge, a
        machine text, a ruling, or the judge agrees with the rules)."""
        if not self.asks or pair.kind is TextKind.MACHINE or pair.item.id is None or verdict.stage == DedupStage.OVERRIDE.value:
            return None
        if verdict.status == ItemStatus.DUPLICATE.value and verdict.rule == "fresh" and verdict.stage in PARAPHRASE_STAGES and verdict.matched is not None:
            weighed = self._weigh(pair, [verdict.matched], index=index, facts=facts, session=session)
            if verdict.matched not in weighed:
                return None
            p_same, evidence = weighed[verdict.matched]
            if p_same >= self.config.confirm_threshold or not self._room(session, pair.item):
                return None
            evidence.update(rule=verdict.rule, stage=verdict.stage, score=verdict.score, threshold=self.config.confirm_threshold)
            return Asked(verdict.matched, p_same, ItemStatus.DUPLICATE.value, evidence)
        if verdict.status != ItemStatus.UNIQUE.value or verdict.stage != DedupStage.NONE.value:
            return None
        apart = facts.kept_apart(pair.item.id)
        mine = _aware(pair.item.occurred_at).timestamp()
        links = {}
        for link in verdict.links:
            if link.other in apart or link.other == pair.item.id or link.other not in index:
                continue
            entry = index.get(link.other)
            # Asked about an earlier representative only: "same" makes the item its duplicate.
            if entry.root == link.other and entry.occurred_at <= mine and entry.status != ItemStatus.DUPLICATE.value:
                links[link.other] = link
        if not links:
            return None
        weighed = self._weigh(pair, list(links), index=index, facts=facts, session=session)
        if not weighed:
            return None
        other, (p_same, evidence) = max(weighed.items(), key=lambda entry: (entry[1][0], -entry[0]))
        if p_same < self.config.ask_threshold or not self._room(session, pair.item):
            return None
        link = links[other]
        evidence.update(rule=None, stage=link.stage, score=link.score, threshold=self.config.ask_threshold)
        return Asked(other, p_same, ItemStatus.UNIQUE.value, evidence)

    def _room(self, session: Session, item: Item) -> bool:
        """Whether `item`'s source has room for one more open question (`DedupConfig.ask_share`
        of its items; its own open question, if any, does not count)."""
        asked = session.exec(
            select(func.count())
            .select_from(DedupQuestion)
            .join(Item, col(Item.id) == col(DedupQuestion.item_id))
            .where(Item.source_id == item.source_id, DedupQuestion.state == QuestionState.OPEN.value, DedupQuestion.item_id != item.id)
        ).one()
        items = session.exec(select(func.count()).select_from(Item).where(Item.source_id == item.source_id)).one()
        return int(asked) < max(1, math.ceil(self.config.ask_share * int(items)))

    def _weigh(self, pair: Pair, others: list[int], *, index: SimilarityIndex, facts: Facts, session: Session) -> dict[int, tuple[float, dict[str, Any]]]:
        """P and the evidence of the pair of `pair.item` with each of `others` (those the index
        holds vectors of); {} when the judge fails, which stops asking for this run (logged)."""
        assert self.judge is not None
        rows = {row.id: row for row in session.exec(select(Item).where(col(Item.id).in_(others))).all()}
        keys = {other: (index.get(other).body_key, index.get(other).title_key) for other in others if other in rows}
        theirs = facts.unreadable(keys)
        mine = PairText(pair.item.title, pair.item.input, pair.item.occurred_at, _fields(pair.item.meta))
        found: dict[int, tuple[float, dict[str, Any]]] = {}
        for other in others:
            row = rows.get(other)
            if row is None:
                continue
            body, title = index.vectors(other)
            if pair.body is None or pair.title is None:
                body_cosine, title_cosine = math.nan, math.nan
            else:
                body_cosine, title_cosine = float(body @ pair.body), float(title @ pair.title)
            unreadable = theirs.get(other, Unreadable())
            scores = PairScores(body_cosine, title_cosine, (pair.unreadable.body, pair.unreadable.title), (unreadable.body, unreadable.title))
            common = facts.common_lines(pair.item.source_id)
            if row.source_id != pair.item.source_id:
                common = common | facts.common_lines(row.source_id)
            theirs_text = PairText(row.title, row.input, row.occurred_at, _fields(row.meta))
            features = pair_features(mine, theirs_text, scores, common=common, recipe=self.recipe)
            try:
                shipped = float(self.judge.probability(features))
            except Exception as exc:  # a judge that cannot score these features: the rules decide alone
                logger.warning("the same-incident judge failed on a pair (%s): curation asks no more dedup questions in this run", exc)
                self._failed = True
                return {}
            if math.isnan(shipped):
                continue
            source_refit = refit_for(session, pair.item.source_id)
            p_same = shipped if source_refit is None else source_refit.probability(shipped, features)
            evidence = _evidence(features, display_title(pair.item.title, pair.item.input), display_title(row.title, row.input))
            evidence["shipped_p"] = round(shipped, 4)
            if source_refit is not None:
                evidence["refit_rulings"] = source_refit.rulings
            found[other] = (round(p_same, 4), evidence)
        return found

    def record(self, session: Session, item_id: int, asked: Asked | None, open_questions: Mapping[int, DedupQuestion], *, now: datetime) -> None:
        """Keep `item_id`'s one open question in step with its new decision: asked (at `now`), the
        open question is updated (or a new one added); not asked, an open one is withdrawn."""
        question = open_questions.get(item_id)
        if asked is None:
            if question is not None:
                question.state = QuestionState.WITHDRAWN.value
                session.add(question)
            return
        if question is None:
            question = DedupQuestion(item_id=item_id, other_id=asked.other, p_same=asked.p_same, rules_outcome=asked.rules_outcome, evidence=asked.evidence, asked_at=now)
        else:
            question.other_id, question.p_same, question.rules_outcome, question.evidence = asked.other, asked.p_same, asked.rules_outcome, asked.evidence
            question.asked_at = now
        session.add(question)


def asked_verdict(verdict: Verdict, asked: Asked) -> Verdict:
    """The decision an asked item gets: `unique`, with the question in its details (`asked`), and
    the judge's `p_same` and `features`, which the item's explanation shows."""
    details = {key: value for key, value in verdict.details.items() if key not in ("rule", "matched_item", "margin", "read_as_characters")}
    evidence = asked.evidence
    details["asked"] = {"other": asked.other, "rules_outcome": asked.rules_outcome, "rule": evidence.get("rule"), "stage": evidence.get("stage"), "p_same": asked.p_same}
    details["p_same"] = asked.p_same
    details["features"] = asked.evidence.get("features", {})
    links = verdict.links if any(link.other == asked.other for link in verdict.links) else (*verdict.links, asked.link())
    return Verdict(ItemStatus.UNIQUE.value, DedupStage.NONE.value, details=details, links=links)


def source_rulings(session: Session, source_id: int) -> list[Ruling]:
    """The answered questions about items of `source_id`, as rulings a refit reads (the shipped
    judge's P when asked, the features it weighed, and the answer)."""
    query = (
        select(DedupQuestion.p_same, DedupQuestion.evidence, DedupQuestion.ruling)
        .join(Item, col(Item.id) == col(DedupQuestion.item_id))
        .where(Item.source_id == source_id, DedupQuestion.state == QuestionState.ANSWERED.value)
        .order_by(col(DedupQuestion.id))
    )
    rulings = []
    for p_same, evidence, ruling in session.exec(query):
        shipped = (evidence or {}).get("shipped_p", p_same)
        features = (evidence or {}).get("features") or {}
        rulings.append(Ruling(float(shipped), {name: float(value) for name, value in features.items()}, ruling == QuestionRuling.SAME.value))
    return rulings


def refit_for(session: Session, source_id: int) -> Refit | None:
    """`source_id`'s refit of the judge from its answered questions (None while there are too
    few), made once per session: a curation batch sees the answers given before it began."""
    refits: dict[int, Refit | None] = session.info.setdefault("judge_refits", {})
    if source_id not in refits:
        refits[source_id] = refit(source_rulings(session, source_id))
    return refits[source_id]


def open_questions_of(session: Session, item_ids: list[int]) -> dict[int, DedupQuestion]:
    """The open question of each of `item_ids` that has one."""
    if not item_ids:
        return {}
    query = select(DedupQuestion).where(col(DedupQuestion.item_id).in_(item_ids), DedupQuestion.state == QuestionState.OPEN.value).order_by(col(DedupQuestion.id))
    return {question.item_id: question for question in session.exec(query)}


def _fields(meta: Mapping[str, Any] | None) -> dict[str, str]:
    """An item's mapped fields a pair compares: short values (not texts, not links)."""
    found = {}
    for name, value in (meta or {}).items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            continue
        text = str(value).strip()
        if text and len(text) <= FIELD_LENGTH and not urlsplit(text).netloc:
            found[name] = text
    return found


def _evidence(features: Mapping[str, float], mine: str, theirs: str) -> dict[str, Any]:
    differences = [why] if (why := distinction(mine, theirs)) else []
    differences += [label for name, label in _CONFLICTS.items() if features.get(name) == 1.0 and not any(label in known for known in differences)]
    rounded = {name: (round(float(value), 4) if not math.isnan(float(value)) else None) for name, value in features.items()}
    return {"features": {name: value for name, value in rounded.items() if value is not None}, "title_differences": differences}


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
