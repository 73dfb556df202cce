"""One function turns a stored dedup decision into its explanation (`service.items.reads.explain_decision`):
the rule, the threshold cleared and the margin, the item matched, the runner-ups, the refused
matches and why, the unreadable fields, a calibrated P when one is recorded; items of a sealed slice
the reader may not see are never named, nor are their scores' reasons quoted."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.dedup import DedupDecision
from service.items.reads import explain_decision, named_items

AT = datetime(2024, 5, 1, tzinfo=UTC)
THRESHOLDS = {"minhash": 0.65, "guard": 0.72, "fresh": 0.85, "fresh_title": 0.7}


def _duplicate(**extra: object) -> DedupDecision:
    details = {
        "rules": "r2",
        "thresholds": THRESHOLDS,
        "rule": "fresh",
        "matched_item": 7,
        "margin": 0.0612,
        "best_jaccard": {"item": 9, "score": 0.3125},
        "best_embedding": {"item": 7, "cosine": 0.9112, "title_cosine": 0.8031},
        **extra,
    }
    return DedupDecision(id=1, item_id=12, status="duplicate", stage="embedding", score=0.9112, matched_item_id=7, decided_at=AT, details=details)


def _unique() -> DedupDecision:
    details = {
        "rules": "r2",
        "thresholds": THRESHOLDS,
        "unreadable": {"title": 0.65},
        "best_jaccard": {"item": 3, "score": 0.41},
        "best_embedding": {"item": 5, "cosine": 0.8, "title_cosine": 0.55},
        "vetoed": [
            {"item": 3, "stage": "exact", "score": 1.0, "why": "different version: 9.4.44 vs 9.4.39"},
            {
                "item": 5,
                "stage": "embedding",
                "score": 0.93,
                "why": "the model cannot read the text (title 65% unknown or spelled out): alike in characters title 0.20, 0.7 needed",
                "unreadable": {"title": 0.65},
            },
        ],
    }
    return DedupDecision(id=2, item_id=13, status="unique", stage="none", score=None, decided_at=AT, details=details)


def test_a_duplicate_is_explained_by_its_rule_threshold_margin_and_match() -> None:
    why = explain_decision(_duplicate())
    assert (why.rule, why.stage, why.score, why.threshold, why.margin) == ("fresh", "embedding", 0.9112, 0.85, 0.0612)
    assert why.matched is not None and (why.matched.item_id, why.matched.title_cosine) == (7, 0.8031)
    assert why.best_near_verbatim is not None and (why.best_near_verbatim.item_id, why.best_near_verbatim.score) == (9, 0.3125)
    assert why.thresholds == THRESHOLDS and why.rules_version == "r2" and why.p_same is None
    assert "Duplicate of item 7 by the fresh rule" in why.summary and "cleared the threshold 0.850 by 0.061" in why.summary


def test_a_calibrated_probability_and_its_features_are_shown_when_recorded() -> None:
    why = explain_decision(_duplicate(p_same=0.973, features={"body_cosine": 0.9112, "minhash": 0.31, "label": "x"}))
    assert why.p_same == 0.973 and why.features == {"body_cosine": 0.9112, "minhash": 0.31}
    assert "P(same incident) 0.97" in why.summary


def test_a_unique_item_names_the_matches_refused_and_why() -> None:
    why = explain_decision(_unique())
    assert why.matched is None and why.rule is None and why.threshold is None
    assert [(veto.item_id, veto.stage, veto.sealed) for veto in why.vetoed] == [(3, "exact", False), (5, "embedding", False)]
    assert why.vetoed[0].why == "different version: 9.4.44 vs 9.4.39" and why.vetoed[1].unreadable == {"title": 0.65}
    assert why.unreadable == {"title": 0.65}
    assert "Refused item 3 (exact 1.000): different version: 9.4.44 vs 9.4.39." in why.summary
    assert "near-verbatim item 3 at 0.410" in why.summary and "paraphrase item 5 at 0.800" in why.summary
    assert "cannot read its title (65%)" in why.summary
    assert named_items([_unique()]) == {3, 5}


def test_items_of_a_sealed_slice_are_never_named() -> None:
    why = explain_decision(_unique(), hidden={3, 5})
    text = why.model_dump_json()
    assert all(veto.item_id is None and veto.sealed for veto in why.vetoed)
    assert [veto.why for veto in why.vetoed] == ["different version", "the model cannot read the text"]
    assert why.vetoed[1].unreadable == {}
    assert "9.4.39" not in text and "item 3" not in why.summary and "item 5" not in why.summary and "a sealed item" in why.summary
    assert why.best_near_verbatim is not None and why.best_near_verbatim.item_id is None and why.best_near_verbatim.sealed
    matched = explain_decision(_duplicate(), hidden={7})
    assert matched.matched is not None and matched.matched.item_id is None and "Duplicate of a sealed item" in matched.summary


def test_rulings_are_explained_with_who_ruled_and_the_note_unless_it_concerns_a_sealed_item() -> None:
    apart = DedupDecision(
        id=3, item_id=12, status="unique", stage="override", decided_at=AT, details={"rule": "override", "ruled_apart_from": 7, "note": "other CVE", "actor": "token:curator"}
    )
    why = explain_decision(apart)
    assert why.ruled_apart_from is not None and why.ruled_apart_from.item_id == 7 and why.ruled_by == "token:curator" and why.note == "other CVE"
    assert why.summary == "A person (token:curator) ruled it not a duplicate of item 7. Note: other CVE"
    hidden = explain_decision(apart, hidden={7})
    assert hidden.note is None and "other CVE" not in hidden.summary and "a sealed item" in hidden.summary


def test_an_old_decision_with_few_details_still_explains_itself() -> None:
    old = DedupDecision(id=4, item_id=12, status="unique", stage="none", decided_at=AT, details={})
    assert explain_decision(old).summary == "Unique: no earlier item was close enough."
