"""The pure parts of evals: the sealed slice, canonical content and Merkle roots, rotation, and
schedule periods."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime, timedelta

import pytest

from curation.releases.content import canonical_json, content_digest, merkle_root, released_content
from curation.releases.periods import cron_trigger, period_at
from curation.releases.rotation import Candidate, RotationPolicy, plan_rotation
from curation.releases.sealing import is_sealed, seal_position
from schemas.evals import RetireReason

KEY = bytes(range(32))


def test_seal_position_is_the_hmac_read_as_a_fraction() -> None:
    digest = hmac.new(KEY, b"12345", hashlib.sha256).digest()
    assert seal_position(KEY, 12345) == int.from_bytes(digest[:8], "big") / 2**64
    assert is_sealed(KEY, 12345, 1.0) and not is_sealed(KEY, 12345, 0.0)


def test_sealed_share_follows_the_fraction_and_depends_on_the_key() -> None:
    ids = range(1, 20_001)
    share = sum(is_sealed(KEY, item_id, 0.2) for item_id in ids) / len(ids)
    assert abs(share - 0.2) < 0.01
    other = secrets.token_bytes(32)
    assert {item_id for item_id in ids if is_sealed(KEY, item_id, 0.2)} != {item_id for item_id in ids if is_sealed(other, item_id, 0.2)}
    with pytest.raises(ValueError, match="at least 16 bytes"):
        seal_position(b"short", 1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        is_sealed(KEY, 1, 1.5)


def test_canonical_json_sorts_keys_without_spaces_and_keeps_unicode() -> None:
    assert canonical_json({"b": [1, "é"], "a": {"z": None, "y": True}}) == '{"a":{"y":true,"z":null},"b":[1,"é"]}'
    text = canonical_json({"x": "é"})
    assert content_digest(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    with pytest.raises(ValueError, match="tz-aware"):
        released_content(item_id=1, source="s", external_id="e", occurred_at=datetime(2024, 1, 1), title="", input="", reference="", metadata={}, tags=[])


def _leaf(item_id: int, digest: str) -> bytes:
    return hashlib.sha256(b"\x00" + f"{item_id}:{digest}".encode()).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def test_merkle_root_is_rfc6962_over_leaves_sorted_by_item_id() -> None:
    entries = [(3, "c" * 64), (1, "a" * 64), (2, "b" * 64)]
    a, b, c = _leaf(1, "a" * 64), _leaf(2, "b" * 64), _leaf(3, "c" * 64)
    assert merkle_root(entries) == _node(_node(a, b), c).hex()
    assert merkle_root(entries[:1]) == c.hex()
    assert merkle_root([]) == hashlib.sha256(b"").hexdigest()
    five = [(n, f"{n:064x}") for n in range(1, 6)]
    leaves = [_leaf(n, digest) for n, digest in five]
    assert merkle_root(five) == _node(_node(_node(leaves[0], leaves[1]), _node(leaves[2], leaves[3])), leaves[4]).hex()
    assert merkle_root([(1, "a" * 64), (2, "b" * 64)]) != merkle_root([(1, "a" * 64), (2, "d" * 64)])
    with pytest.raises(ValueError, match="twice"):
        merkle_root([(1, "a" * 64), (1, "b" * 64)])


START = datetime(2024, 6, 1, 3, tzinfo=UTC)


def _candidate(item_id: int, days_before: float, *, source: str = "ops", status: str = "approved", exposed: bool = False) -> Candidate:
    return Candidate(item_id=item_id, source=source, occurred_at=START - timedelta(days=days_before), status=status, exposed=exposed)


def _policy(target: int = 10, quotas: dict[str, int] | None = None) -> RotationPolicy:
    return RotationPolicy(window_start=START - timedelta(days=100), window_end=START, target_size=target, admitted=frozenset({"approved"}), source_quotas=quotas or {})


def test_rotation_retires_exposed_aged_and_rejected_members_and_withholds_pending_ones() -> None:
    current = [
        _candidate(1, 10, exposed=True),
        _candidate(2, 101),
        _candidate(3, 5, status="rejected"),
        _candidate(4, 5, status="duplicate"),
        _candidate(5, 6, status="candidate"),
        _candidate(6, 7),
    ]
    plan = plan_rotation(_policy(), current, [_candidate(7, 1), _candidate(8, 1, exposed=True), _candidate(9, 120), _candidate(10, 2, status="unique"), _candidate(11, -1)])
    assert plan.retired == {1: RetireReason.EXPOSED, 2: RetireReason.AGED_OUT, 3: RetireReason.REJECTED, 4: RetireReason.DUPLICATE}
    assert plan.withheld == [5]
    assert plan.members == [7, 6] and plan.added == [7]


def test_rotation_takes_the_newest_within_quotas_and_displaces_older_members() -> None:
    current = [_candidate(1, 50), _candidate(2, 40, source="b"), _candidate(3, 30)]
    fresh = [_candidate(4, 1), _candidate(5, 2, source="b"), _candidate(6, 3, source="b"), _candidate(7, 3)]
    plan = plan_rotation(_policy(target=4, quotas={"b": 1}), current, fresh)
    # Newest first: 4 (ops), 5 (b), then 7 (ops, same day as 6 but a higher id), 6 is over b's quota, 3 (ops).
    assert plan.members == [4, 5, 7, 3]
    assert plan.added == [4, 5, 7]
    assert plan.retired == {2: RetireReason.DISPLACED, 1: RetireReason.DISPLACED}
    with pytest.raises(ValueError, match="both a member"):
        plan_rotation(_policy(), [_candidate(1, 1)], [_candidate(1, 1)])


def test_a_period_starts_at_the_latest_tick_at_or_before_the_time() -> None:
    monthly = period_at("0 3 1 * *", datetime(2024, 3, 15, tzinfo=UTC))
    assert (monthly.start, monthly.end) == (datetime(2024, 3, 1, 3, tzinfo=UTC), datetime(2024, 4, 1, 3, tzinfo=UTC))
    assert period_at("0 3 1 * *", datetime(2024, 3, 1, 3, tzinfo=UTC)).start == datetime(2024, 3, 1, 3, tzinfo=UTC)
    assert period_at("0 3 1 * *", datetime(2024, 3, 1, 2, 59, tzinfo=UTC)).start == datetime(2024, 2, 1, 3, tzinfo=UTC)
    # Cron day-of-week numbers: 1 is Monday, 0 and 7 are Sunday (APScheduler alone counts from Monday).
    assert period_at("0 9 * * 1", datetime(2024, 6, 5, tzinfo=UTC)).start == datetime(2024, 6, 3, 9, tzinfo=UTC)
    assert period_at("0 9 * * 0", datetime(2024, 6, 5, tzinfo=UTC)).start == datetime(2024, 6, 2, 9, tzinfo=UTC)
    assert period_at("0 9 * * 7", datetime(2024, 6, 5, tzinfo=UTC)).start == datetime(2024, 6, 2, 9, tzinfo=UTC)
    assert period_at("*/15 * * * *", datetime(2024, 6, 5, 10, 7, tzinfo=UTC)).start == datetime(2024, 6, 5, 10, 0, tzinfo=UTC)
    assert period_at("0 0 29 2 *", datetime(2025, 6, 1, tzinfo=UTC)).start == datetime(2024, 2, 29, tzinfo=UTC)
    for bad in ("0 3 1 *", "61 3 1 * *", "0 3 1 * */2"):
        with pytest.raises(ValueError, match=r"schedule|day-of-week"):
            cron_trigger(bad)
