"""The pure parts of the linking core and the balance: strata and recorded compositions, balanced
picking, and the rotation rules 3 to 5 (`curation.releases.rotation`) on made-up candidates."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from curation.releases.balance import pick_balanced
from curation.releases.composition import DIMENSIONS, DRIFT, NO_TAG, OTHER, Strata, age_band, length_band, shares, strata_of, summary, target
from curation.releases.rotation import Candidate, RotationPolicy, plan_rotation
from schemas.evals import EvalCreate, EvalUpdate, RetireReason

START = datetime(2024, 6, 1, 3, tzinfo=UTC)


def test_strata_bands_and_categories() -> None:
    assert [length_band(n) for n in (0, 199, 200, 499, 500, 1999, 2000)] == ["<200", "<200", "200-499", "200-499", "500-1999", "500-1999", "2000+"]
    assert age_band(START - timedelta(days=29, hours=23), START) == "<30d" and age_band(START - timedelta(days=30), START) == "30-89d"
    assert age_band(START - timedelta(days=400), START) == "365d+" and age_band(START + timedelta(days=1), START) == "<30d"
    assert strata_of(source="ops", tags=["CWE-79", "CWE-20"], length=250, occurred_at=START - timedelta(days=100), at=START) == Strata("ops", "CWE-79", "200-499", "90-179d")
    assert strata_of(source="ops", tags=[], length=10, occurred_at=START, at=START).tag == NO_TAG


def test_a_recorded_composition_names_only_categories_dev_items_carry() -> None:
    dev = [Strata("ops", f"T{n % 3}", "<200", "<30d") for n in range(9)]
    sealed_only = Strata("sec", "SECRET-TAG", "2000+", "30-89d")
    record = summary([*dev, sealed_only], named_tags={entry.tag for entry in dev})
    assert record["items"] == 10
    assert [(entry["value"], entry["count"]) for entry in record["tag"]] == [("T0", 3), ("T1", 3), ("T2", 3), (OTHER, 1)]
    assert "SECRET-TAG" not in str(record)
    assert [entry["value"] for entry in record["length"]] == ["<200", "2000+"] and [entry["value"] for entry in record["age"]] == ["<30d", "30-89d"]
    assert sum(entry["share"] for entry in record["source"]) == pytest.approx(1.0)


def test_the_target_follows_the_pool_a_little_in_all_but_age() -> None:
    previous = {"source": {"a": 1.0}, "tag": {"x": 0.5, "y": 0.5}, "length": {"<200": 1.0}, "age": {"<30d": 1.0}}
    pool = {"source": {"a": 0.5, "b": 0.5}, "tag": {"x": 1.0}, "length": {"<200": 1.0}, "age": {"30-89d": 1.0}}
    aimed = target(previous, pool)
    assert aimed["source"] == pytest.approx({"a": 1 - DRIFT / 2, "b": DRIFT / 2})
    assert aimed["tag"] == pytest.approx({"x": 0.5 + DRIFT / 2, "y": 0.5 - DRIFT / 2})
    assert aimed["age"] == {"<30d": 1.0}
    assert target({}, pool) == pool


def _strata(n: int, tag: str, source: str = "ops") -> tuple[int, Strata]:
    return (n, Strata(source, tag, "<200", "<30d"))


def test_balanced_picking_follows_the_target_within_quotas_and_is_deterministic() -> None:
    # 90 of the candidates are category A, listed first (the caller prefers them); the target is half and half.
    candidates = [_strata(n, "A") for n in range(90)] + [_strata(100 + n, "B") for n in range(30)]
    aimed = {"source": {"ops": 1.0}, "tag": {"A": 0.5, "B": 0.5}, "length": {"<200": 1.0}, "age": {"<30d": 1.0}}
    chosen = {dimension: Counter[str]() for dimension in DIMENSIONS}
    picked = pick_balanced(candidates, places=40, target=aimed, chosen=chosen, taken={}, quotas={})
    assert len(picked) == 40 and chosen["tag"] == Counter({"A": 20, "B": 20})
    assert picked[:2] == [0, 100] and [n for n in picked if n < 100] == list(range(20))  # the first of each category first
    again = pick_balanced(candidates, places=40, target=aimed, chosen={dimension: Counter[str]() for dimension in DIMENSIONS}, taken={}, quotas={})
    assert again == picked
    taken: dict[str, int] = {}
    mixed = [_strata(n, "A", "ops") for n in range(30)] + [_strata(100 + n, "B", "sec") for n in range(30)]
    quota_picks = pick_balanced(mixed, places=40, target=aimed, chosen={dimension: Counter[str]() for dimension in DIMENSIONS}, taken=taken, quotas={"sec": 5})
    assert taken == {"ops": 30, "sec": 5} and len(quota_picks) == 35  # the quota wins over the balance; no other item is left


def _candidate(item_id: int, days_before: float, *, tag: str = "A", split: str = "dev", source: str = "ops", status: str = "approved", exposed: bool = False) -> Candidate:
    return Candidate(item_id=item_id, source=source, occurred_at=START - timedelta(days=days_before), status=status, exposed=exposed, split=split, tags=(tag,), length=100)


def _policy(*, share: float = 0.3, previous_dev: frozenset[int] = frozenset(), reference: dict[str, dict[str, float]] | None = None, target_size: int = 20) -> RotationPolicy:
    return RotationPolicy(
        window_start=START - timedelta(days=365),
        window_end=START,
        target_size=target_size,
        admitted=frozenset({"approved"}),
        linking_share=share,
        previous_dev=previous_dev,
        reference=reference,
    )


def _previous(count: int = 20) -> list[Candidate]:
    """The members of a release of 20 (ids 1-20, a month old): every fifth sealed."""
    return [_candidate(n, 40 + n / 10, split="sealed" if n % 5 == 0 else "dev") for n in range(1, count + 1)]


def _newer(count: int = 40, first: int = 100) -> list[Candidate]:
    """`count` never-released items, all newer than the members (every fifth would be sealed)."""
    return [_candidate(first + n, 1 + n / 10, split="sealed" if n % 5 == 0 else "dev") for n in range(count)]


def test_the_linking_core_carries_its_share_of_the_dev_split_and_never_a_sealed_item() -> None:
    previous = _previous()
    dev_before = frozenset(member.item_id for member in previous if member.split == "dev")
    # Newest first alone would replace every member: 40 newer items for 20 places.
    assert plan_rotation(_policy(share=0.0, previous_dev=dev_before), previous, _newer()).linking.carried == 0
    plan = plan_rotation(_policy(share=0.3, previous_dev=dev_before), previous, _newer())
    members = set(plan.members)
    carried = members & dev_before
    dev = [item_id for item_id in members if item_id < 100 or (item_id - 100) % 5]
    assert len(members) == 20 and plan.linking.dev == len(dev)
    assert len(carried) == plan.linking.carried == plan.linking.wanted == -(-3 * len(dev) // 10) and plan.linking.short == 0
    assert not members & {member.item_id for member in previous if member.split == "sealed"}
    assert carried == {member.item_id for member in previous if member.item_id in dev_before and member.item_id in plan.members}
    assert all(reason is RetireReason.DISPLACED for reason in plan.retired.values()) and set(plan.retired) == {member.item_id for member in previous} - members
    # The newest of the previous dev split are the core (most representative first, then newest).
    assert carried == set(sorted(dev_before)[: len(carried)])
    half = plan_rotation(_policy(share=0.5, previous_dev=dev_before), previous, _newer())
    assert half.linking.carried >= 0.5 * half.linking.dev


def test_the_linking_core_is_deterministic_whatever_the_order_of_candidates() -> None:
    previous, fresh = _previous(), _newer()
    dev_before = frozenset(member.item_id for member in previous if member.split == "dev")
    reference = {"source": {"ops": 1.0}, "tag": {"A": 0.6, "B": 0.4}, "length": {"<200": 1.0}, "age": {"30-89d": 1.0}}
    policy = _policy(previous_dev=dev_before, reference=reference)
    first = plan_rotation(policy, previous, fresh)
    for seed in range(5):
        shuffled_previous, shuffled_fresh = previous[:], fresh[:]
        random.Random(seed).shuffle(shuffled_previous)
        random.Random(seed + 1).shuffle(shuffled_fresh)
        again = plan_rotation(policy, shuffled_previous, shuffled_fresh)
        assert (again.members, sorted(again.added), again.retired, again.linking) == (first.members, sorted(first.added), first.retired, first.linking)


def test_retirement_wins_over_the_linking_core_and_the_plan_says_how_many_are_missing() -> None:
    previous = _previous()
    dev_before = frozenset(member.item_id for member in previous if member.split == "dev")
    # All but two previous dev items must leave: exposed, aged out, rejected, or waiting for review.
    kinds = iter(["exposed", "aged", "rejected", "candidate"] * 5)
    current = []
    for member in previous:
        kind = next(kinds) if member.item_id in dev_before and member.item_id not in (1, 2) else None
        if kind == "exposed":
            current.append(_candidate(member.item_id, 40, exposed=True))
        elif kind == "aged":
            current.append(_candidate(member.item_id, 400))
        elif kind in ("rejected", "candidate"):
            current.append(_candidate(member.item_id, 40, status=str(kind)))
        else:
            current.append(member)
    plan = plan_rotation(_policy(previous_dev=dev_before), current, _newer())
    assert plan.linking.carried == 2 and plan.linking.wanted > 2 and plan.linking.short == plan.linking.wanted - 2
    reasons = Counter(reason.value for item_id, reason in plan.retired.items() if item_id in dev_before and reason is not RetireReason.DISPLACED)
    assert plan.linking.left == {**dict(reasons), "withheld": len([item_id for item_id in plan.withheld if item_id in dev_before])}
    assert set(plan.linking.left) == {"aged_out", "exposed", "rejected", "withheld"}
    assert {1, 2} <= set(plan.members) and len(plan.members) == 20


def test_the_balance_follows_the_previous_composition_on_a_skewed_pool() -> None:
    # The release before: half category A, half B (both sources alike). What arrives is 90% A.
    previous = [_candidate(n, 40 + n / 10, tag="A" if n % 2 else "B", split="sealed" if n % 5 == 0 else "dev") for n in range(1, 41)]
    fresh = [_candidate(100 + n, 1 + n / 100, tag="B" if n % 10 == 0 else "A", split="sealed" if n % 5 == 0 else "dev") for n in range(200)]
    fresh += [_candidate(400 + n, 45 + n / 10, tag="B") for n in range(20)]  # older B items never released (passed over before)
    reference = shares(strata_of(source=c.source, tags=c.tags, length=c.length, occurred_at=c.occurred_at, at=START - timedelta(days=30)) for c in previous)
    dev_before = frozenset(member.item_id for member in previous if member.split == "dev")
    newest = plan_rotation(_policy(share=0.0, target_size=40), previous, fresh)
    balanced = plan_rotation(_policy(share=0.3, previous_dev=dev_before, reference=reference, target_size=40), previous, fresh)
    by_id = {candidate.item_id: candidate for candidate in (*previous, *fresh)}

    def share_of_b(plan_members: list[int]) -> float:
        return sum(by_id[item_id].tags[0] == "B" for item_id in plan_members) / len(plan_members)

    assert share_of_b(newest.members) == pytest.approx(0.1)
    assert balanced.target is not None and abs(share_of_b(balanced.members) - balanced.target["tag"]["B"]) <= 0.05
    assert abs(share_of_b(balanced.members) - 0.5) <= 0.1 and len(balanced.members) == 40
    assert balanced.linking.carried >= balanced.linking.wanted > 0
    # The balance never retires a member the rule of newest first keeps (here: none kept, 200 newer items).
    assert set(balanced.retired) <= set(newest.retired)


def test_the_linking_share_is_a_setting_from_0_to_0_9() -> None:
    assert EvalCreate(name="e", sources=["s"]).linking_share == 0.3 and EvalCreate(name="e", sources=["s"]).balance_composition is True
    assert EvalCreate(name="e", sources=["s"], linking_share=0).linking_share == 0.0
    assert EvalCreate(name="e", sources=["s"], linking_share=0.9).linking_share == 0.9
    for wrong in (-0.1, 0.95, 1):
        with pytest.raises(ValidationError, match="linking_share"):
            EvalCreate(name="e", sources=["s"], linking_share=wrong)
        with pytest.raises(ValidationError, match="linking_share"):
            EvalUpdate(linking_share=wrong)


def test_the_balance_displaces_no_member_the_newest_first_rule_keeps_and_respects_quotas() -> None:
    for seed in range(20):
        rng = random.Random(seed)
        current = [_candidate(n, rng.uniform(20, 200), tag=rng.choice("ABC"), source=rng.choice(["ops", "sec"])) for n in range(1, 31)]
        fresh = [_candidate(100 + n, rng.uniform(1, 200), tag=rng.choice("AAAB"), source=rng.choice(["ops", "sec"])) for n in range(40)]
        reference = {"source": {"ops": 0.5, "sec": 0.5}, "tag": {"A": 0.2, "B": 0.3, "C": 0.5}, "length": {"<200": 1.0}, "age": {"<30d": 0.5, "30-89d": 0.5}}
        quotas = {"sec": 12}
        newest = plan_rotation(RotationPolicy(START - timedelta(days=365), START, 30, frozenset({"approved"}), quotas), current, fresh)
        balanced = plan_rotation(RotationPolicy(START - timedelta(days=365), START, 30, frozenset({"approved"}), quotas, reference=reference), current, fresh)
        assert set(balanced.retired) <= set(newest.retired), seed
        assert len(balanced.members) == len(newest.members) == 30
        by_id = {candidate.item_id: candidate for candidate in (*current, *fresh)}
        assert sum(by_id[item_id].source == "sec" for item_id in balanced.members) <= 12
