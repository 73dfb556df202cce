"""The third dedup outcome, ask a curator (`curation.dedup.questions`): when a verdict is asked
(a paraphrase merge the judge does not confirm, a unique item near a likely same earlier one), the
edges of both thresholds, and a judge that is missing or fails (the rules decide alone)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from curation.dedup import questions as asking
from curation.dedup.boilerplate import CommonLines
from curation.dedup.fingerprints import MinHashRecipe
from curation.dedup.near_links import NearLinkTo
from curation.dedup.pair_features import FEATURES
from curation.dedup.questions import Pair, Questioner, asked_verdict, load_judge
from curation.dedup.readability import Unreadable
from curation.dedup.rules import DedupConfig, Verdict
from curation.dedup.text_kind import TextKind
from schemas.dedup_questions import DedupQuestion, QuestionState
from schemas.item import Item, ItemStatus

EARLIER = datetime(2024, 1, 1, tzinfo=UTC)
NOW = datetime(2024, 2, 1, tzinfo=UTC)
LATER = datetime(2024, 3, 1, tzinfo=UTC)


class FixedJudge:
    """A judge answering one P for every pair, and remembering the features it was given."""

    def __init__(self, p: float) -> None:
        self.p = p
        self.seen: list[Mapping[str, float]] = []

    def probability(self, features: Mapping[str, float]) -> float:
        self.seen.append(features)
        return self.p


class BrokenJudge:
    def __init__(self) -> None:
        self.calls = 0

    def probability(self, features: Mapping[str, float]) -> float:
        self.calls += 1
        raise ValueError("features of another version")


@dataclass
class Entry:
    item_id: int
    occurred_at: float
    root: int
    status: str = ItemStatus.UNIQUE.value
    body_key: str | None = "b"
    title_key: str | None = "t"


class FakeIndex:
    def __init__(self, *entries: Entry) -> None:
        self.entries = {entry.item_id: entry for entry in entries}
        rng = np.random.default_rng(7)
        self._vectors = {entry.item_id: (rng.normal(size=8).astype(np.float32), rng.normal(size=8).astype(np.float32)) for entry in entries}

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.entries

    def get(self, item_id: int) -> Entry:
        return self.entries[item_id]

    def vectors(self, item_id: int) -> tuple[Any, Any]:
        return self._vectors[item_id]


class FakeFacts:
    def __init__(self, apart: set[int] | None = None) -> None:
        self.apart = apart or set()

    def kept_apart(self, item_id: int) -> set[int]:
        return self.apart

    def unreadable(self, keys: Mapping[int, tuple[str | None, str | None]]) -> dict[int, Unreadable]:
        return {}

    def common_lines(self, source_id: int) -> CommonLines:
        return CommonLines()


class FakeResult:
    def __init__(self, rows: list[Item]) -> None:
        self.rows = rows

    def all(self) -> list[Item]:
        return self.rows

    def one(self) -> int:
        return 0  # a count: no open question yet, so there is room to ask


class FakeSession:
    """Answers every select with the items it holds (the questioner filters by id itself)."""

    def __init__(self, *items: Item) -> None:
        self.items = list(items)
        self.added: list[Any] = []
        self.info: dict[str, Any] = {"judge_refits": {1: None}}  # source 1 has no answers to refit on

    def exec(self, _query: Any) -> FakeResult:
        return FakeResult(self.items)

    def add(self, row: Any) -> None:
        self.added.append(row)


def _item(item_id: int, occurred_at: datetime, title: str = "NameNode fails to start after upgrade", text: str = "The NameNode crashes at start.") -> Item:
    return Item(id=item_id, source_id=1, external_id=f"X-{item_id}", occurred_at=occurred_at, title=title, input=text, content_hash=f"h{item_id}", record_digest=f"r{item_id}")


def _world(*others: Item, apart: set[int] | None = None) -> tuple[Pair, FakeIndex, FakeFacts, FakeSession]:
    item = _item(10, NOW, text="NameNode does not come up after the upgrade.")
    index = FakeIndex(*(Entry(other.id or 0, other.occurred_at.timestamp(), other.id or 0) for other in others))
    rng = np.random.default_rng(3)
    pair = Pair(item, rng.normal(size=8).astype(np.float32), rng.normal(size=8).astype(np.float32), Unreadable(0.0, 0.0), TextKind.LONG)
    return pair, index, FakeFacts(apart), FakeSession(*others)


def _merge(other: int, stage: str = "embedding", rule: str = "fresh") -> Verdict:
    return Verdict(ItemStatus.DUPLICATE.value, stage, 0.9, other, {"rule": rule, "matched_item": other, "margin": 0.05, "text": "long"}, (NearLinkTo(other, stage, 0.9),))


def _unique(*links: NearLinkTo) -> Verdict:
    return Verdict(ItemStatus.UNIQUE.value, "none", details={"text": "long"}, links=links)


def _ask(judge: Any, verdict: Verdict, *others: Item, config: DedupConfig | None = None, apart: set[int] | None = None, kind: TextKind = TextKind.LONG) -> asking.Asked | None:
    pair, index, facts, session = _world(*others, apart=apart)
    if kind is not TextKind.LONG:
        pair = Pair(pair.item, pair.body, pair.title, pair.unreadable, kind)
    questioner = Questioner(judge, config or DedupConfig(confirm_threshold=0.6, ask_threshold=0.4), MinHashRecipe())
    return questioner.consider(pair, verdict, index=index, facts=facts, session=session)  # type: ignore[arg-type]


def test_a_paraphrase_merge_the_judge_does_not_confirm_is_asked() -> None:
    judge = FixedJudge(0.3)
    asked = _ask(judge, _merge(1), _item(1, EARLIER))
    assert asked is not None
    assert (asked.other, asked.p_same, asked.rules_outcome) == (1, 0.3, "duplicate")
    assert (asked.evidence["rule"], asked.evidence["stage"], asked.evidence["threshold"]) == ("fresh", "embedding", 0.6)
    assert set(judge.seen[0]) == set(FEATURES)
    assert set(asked.evidence["features"]) <= set(FEATURES) and "title_differences" in asked.evidence


def test_a_merge_at_the_characters_stage_is_weighed_too_and_one_at_the_confirm_threshold_stands() -> None:
    assert _ask(FixedJudge(0.59), _merge(1, stage="characters"), _item(1, EARLIER)) is not None
    assert _ask(FixedJudge(0.6), _merge(1), _item(1, EARLIER)) is None


@pytest.mark.parametrize(("stage", "rule"), [("exact", "exact"), ("minhash", "fresh"), ("embedding", "guard")])
def test_copies_and_guard_matches_are_never_questioned(stage: str, rule: str) -> None:
    assert _ask(FixedJudge(0.0), _merge(1, stage=stage, rule=rule), _item(1, EARLIER)) is None


def test_a_unique_item_near_a_likely_same_earlier_item_is_asked_from_the_ask_threshold_up() -> None:
    link = NearLinkTo(1, "embedding", 0.78)
    asked = _ask(FixedJudge(0.4), _unique(link), _item(1, EARLIER))
    assert asked is not None
    assert (asked.other, asked.rules_outcome, asked.evidence["stage"], asked.evidence["score"], asked.evidence["rule"]) == (1, "unique", "embedding", 0.78, None)
    assert _ask(FixedJudge(0.399), _unique(link), _item(1, EARLIER)) is None


def test_a_unique_item_is_asked_only_about_earlier_representatives_not_ruled_apart() -> None:
    assert _ask(FixedJudge(0.99), _unique(NearLinkTo(2, "embedding", 0.8)), _item(2, LATER)) is None  # a later item
    assert _ask(FixedJudge(0.99), _unique(NearLinkTo(1, "minhash", 0.6)), _item(1, EARLIER), apart={1}) is None  # ruled apart
    assert _ask(FixedJudge(0.99), _unique(NearLinkTo(3, "embedding", 0.8)), _item(1, EARLIER)) is None  # not indexed
    assert _ask(FixedJudge(0.99), _unique(), _item(1, EARLIER)) is None  # near nothing


def test_machine_text_rulings_and_a_missing_judge_ask_nothing() -> None:
    assert _ask(FixedJudge(0.0), _merge(1), _item(1, EARLIER), kind=TextKind.MACHINE) is None
    assert _ask(None, _merge(1), _item(1, EARLIER)) is None
    ruled = Verdict(ItemStatus.DUPLICATE.value, "override", None, 1, {"rule": "override"}, ())
    assert _ask(FixedJudge(0.0), ruled, _item(1, EARLIER)) is None
    assert not Questioner(None, DedupConfig(), MinHashRecipe()).asks


def test_a_judge_that_fails_stops_asking_for_the_run() -> None:
    judge = BrokenJudge()
    pair, index, facts, session = _world(_item(1, EARLIER))
    questioner = Questioner(judge, DedupConfig(), MinHashRecipe())
    assert questioner.consider(pair, _merge(1), index=index, facts=facts, session=session) is None  # type: ignore[arg-type]
    assert not questioner.asks
    assert questioner.consider(pair, _merge(1), index=index, facts=facts, session=session) is None  # type: ignore[arg-type]
    assert judge.calls == 1


def test_a_missing_or_unreadable_model_file_loads_no_judge_and_says_so_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broken = tmp_path / "model.json"
    broken.write_text('{"format": "something else"}', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="curation.dedup.questions"):
        for _ in range(3):
            assert load_judge(tmp_path / "missing.json") is None
            assert load_judge(broken) is None
    assert len([record for record in caplog.records if "cannot be loaded" in record.getMessage()]) == 2
    assert load_judge() is not None  # the shipped model


def test_thresholds_are_probabilities() -> None:
    for bad in ({"confirm_threshold": -0.1}, {"ask_threshold": 1.5}):
        with pytest.raises(ValueError, match="probability"):
            DedupConfig(**bad)  # type: ignore[arg-type]
    DedupConfig(confirm_threshold=0.0, ask_threshold=1.0)


def test_an_asked_item_is_decided_unique_with_the_question_in_its_details() -> None:
    merge = _merge(1)
    asked = asking.Asked(1, 0.31, "duplicate", {"rule": "fresh", "stage": "embedding", "score": 0.9, "features": {"body_cosine": 0.9}})
    verdict = asked_verdict(merge, asked)
    assert (verdict.status, verdict.stage, verdict.matched, verdict.rule) == (ItemStatus.UNIQUE.value, "none", None, None)
    assert verdict.details["asked"] == {"other": 1, "rules_outcome": "duplicate", "rule": "fresh", "stage": "embedding", "p_same": 0.31}
    assert (verdict.details["p_same"], verdict.details["features"]) == (0.31, {"body_cosine": 0.9})
    assert [link.other for link in verdict.links] == [1]
    # A pair asked without a link of its own gets one: it keeps both on one side of a split.
    assert [link.other for link in asked_verdict(_unique(), asked).links] == [1]


def test_an_item_holds_one_open_question_updated_or_withdrawn_as_it_is_decided_again() -> None:
    questioner = Questioner(FixedJudge(0.5), DedupConfig(), MinHashRecipe())
    session = FakeSession()
    asked_at, again_at = datetime(2025, 3, 1, 9, tzinfo=UTC), datetime(2025, 3, 2, 9, tzinfo=UTC)
    first = asking.Asked(1, 0.3, "duplicate", {"stage": "embedding"})
    questioner.record(session, 10, first, {}, now=asked_at)  # type: ignore[arg-type]
    (question,) = session.added
    assert (question.item_id, question.other_id, question.state, question.rules_outcome, question.asked_at) == (10, 1, QuestionState.OPEN.value, "duplicate", asked_at)
    again = asking.Asked(2, 0.7, "unique", {"stage": "minhash"})
    questioner.record(session, 10, again, {10: question}, now=again_at)  # type: ignore[arg-type]
    assert (question.other_id, question.p_same, question.rules_outcome, question.state, question.asked_at) == (2, 0.7, "unique", QuestionState.OPEN.value, again_at)
    questioner.record(session, 10, None, {10: question}, now=again_at)  # type: ignore[arg-type]
    assert question.state == QuestionState.WITHDRAWN.value
    assert len({id(row) for row in session.added}) == 1
    questioner.record(session, 11, None, {}, now=again_at)  # type: ignore[arg-type]
    assert isinstance(session.added[-1], DedupQuestion) and session.added[-1] is question


def test_the_shipped_judge_asks_only_where_curation_embeds_with_the_model_it_was_fitted_on(caplog: pytest.LogCaptureFixture) -> None:
    assert asking.judge_for("all-MiniLM-L6-v2@175708d2d5f4/seq256") is not None
    assert asking.judge_for("http:embeddings.local/all-MiniLM-L6-v2/dim384") is not None
    other = f"test-other-model-{id(caplog)}"
    with caplog.at_level(logging.WARNING, logger="curation.dedup.questions"):
        assert asking.judge_for(other) is None
        assert asking.judge_for(other) is None
    assert len([record for record in caplog.records if other in record.getMessage()]) == 1


def test_settings_set_the_thresholds_and_zero_switches_questioning_merges_off() -> None:
    from tests.conftest import make_settings

    settings = make_settings("sqlite:///unused.db")
    assert (settings.dedup_config().confirm_threshold, settings.dedup_config().ask_threshold) == (DedupConfig().confirm_threshold, DedupConfig().ask_threshold)
    changed = settings.model_copy(update={"dedup_confirm_threshold": 0.0, "dedup_ask_threshold": 1.0}).dedup_config()
    assert (changed.confirm_threshold, changed.ask_threshold) == (0.0, 1.0)
