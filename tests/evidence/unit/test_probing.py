"""Completion probing without a network: cutting items, the probe prompt, similarity scoring, and
the report's per-item and aggregate figures."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

import pytest

from curation.evidence.probe_report import control_tail, probe_report
from curation.evidence.probing import (
    CannotCut,
    SealedItemRefused,
    build_prompt,
    cut_item,
    format_options,
    longest_common_substring,
    plan_probes,
    similarity,
)
from curation.refusals import Refused
from schemas.evidence import CutMode, CutPolicy, ProbeCompletion, ProbeItem, ProbeReport
from schemas.probe_tests import ProbeMetric

LEV = ProbeMetric.LEVENSHTEIN
LCS = ProbeMetric.LCS_RATIO
WHEN = datetime(2023, 6, 1, tzinfo=UTC)
TEXT = "The disk on node seven filled with rotated logs because the cleanup job ran under the wrong user account"


def _item(text: str = TEXT, options: tuple[str, ...] = (), item_id: str = "i1", when: datetime = WHEN, sealed: bool = False) -> ProbeItem:
    return ProbeItem(item_id=item_id, occurred_at=when, text=text, options=options, sealed=sealed)


def test_default_cut_is_at_the_word_boundary_nearest_the_middle() -> None:
    cut = cut_item(_item())
    assert cut.mode == CutMode.WORD_BOUNDARY
    assert cut.prefix + " " + cut.remainder == TEXT
    assert TEXT[cut.cut_at - 1] == " " and TEXT[cut.cut_at] != " "
    assert abs(cut.cut_at - len(TEXT) / 2) <= max(len(word) for word in TEXT.split())


def test_the_cut_fraction_and_minimum_words_are_configurable() -> None:
    early = cut_item(_item(), CutPolicy(fraction=0.2))
    assert early.cut_at < len(TEXT) * 0.3
    tight = cut_item(_item("one two three four five six"), CutPolicy(fraction=0.1, min_prefix_words=2))
    assert tight.prefix == "one two"
    with pytest.raises(CannotCut, match="has 4 words; a cut needs at least 3 before and 3 after"):
        cut_item(_item("one two three four"))


def test_items_with_answer_options_are_cut_before_them_by_default() -> None:
    item = _item("Which service filled the disk?", options=("the cleanup job", "the   log rotator", "the backup agent"))
    cut = cut_item(item)
    assert cut.mode == CutMode.BEFORE_OPTIONS
    assert cut.prefix == "Which service filled the disk?"
    assert cut.remainder == "A. the cleanup job\nB. the log rotator\nC. the backup agent"
    inside = cut_item(item, CutPolicy(mode=CutMode.WORD_BOUNDARY, min_prefix_words=2, min_remainder_words=2))
    assert inside.remainder.endswith("\nA. the cleanup job\nB. the log rotator\nC. the backup agent")
    with pytest.raises(CannotCut, match="no answer options"):
        cut_item(_item(), CutPolicy(mode=CutMode.BEFORE_OPTIONS))


def test_options_past_26_are_numbered() -> None:
    assert format_options([str(index) for index in range(27)]).splitlines()[26] == "27. 26"


def test_the_prompt_names_dataset_and_split_asks_for_an_exact_reproduction_and_ends_with_the_prefix() -> None:
    item = _item("Which service filled the disk?", options=("a", "b"))
    cut = cut_item(item)
    prompt = build_prompt(cut, dataset="incidents-2024", split="dev", with_options=True)
    user = prompt.messages[-1].content
    assert "the dev split of the incidents-2024 dataset" in user
    assert "exactly as it appears in the dataset, word for word" in user
    assert "answer options in their original order" in user
    assert user.endswith("First part:\nWhich service filled the disk?")
    assert cut.remainder not in user
    assert prompt.max_tokens == 16 + -(-len(cut.remainder) // 3)
    assert build_prompt(cut_item(_item(TEXT * 20)), dataset="d", split="s", with_options=False, max_tokens_cap=64).max_tokens == 64


def test_planning_refuses_sealed_items_and_repeated_ids_and_lists_items_it_cannot_cut() -> None:
    with pytest.raises(SealedItemRefused, match="never probed") as refused:
        plan_probes([_item(), _item(item_id="s", sealed=True)], dataset="d", split="s")
    assert isinstance(refused.value, Refused) and (refused.value.reason, refused.value.status) == ("sealed_item", 409)  # answered as every refusal is
    with pytest.raises(ValueError, match="appears twice"):
        plan_probes([_item(), _item()], dataset="d", split="s")
    plan = plan_probes([_item(), _item("too short", item_id="short")], dataset="d", split="s")
    assert [prompt.item_id for prompt in plan.prompts] == ["i1"]
    assert "short" in plan.not_cut


def test_similarity_of_an_exact_reproduction_is_one_and_of_nothing_is_zero() -> None:
    remainder = "ran under the wrong user account"
    assert similarity(remainder, remainder) == {LEV: 1.0, LCS: 1.0}
    assert similarity("  ran under\nthe wrong   user account ", remainder) == {LEV: 1.0, LCS: 1.0}
    assert similarity("", remainder) == {LEV: 0.0, LCS: 0.0}


def test_an_echoed_prefix_is_not_counted_against_the_completion() -> None:
    assert similarity("The disk filled ran under the wrong user account", "ran under the wrong user account", prefix="The disk filled") == {LEV: 1.0, LCS: 1.0}


def test_rambling_costs_levenshtein_but_not_the_longest_verbatim_run() -> None:
    remainder = "ran under the wrong user account"
    scores = similarity(remainder + ". I hope this helps, let me know if you need anything else!", remainder)
    assert scores[LCS] == 1.0
    assert scores[LEV] < 0.5


def test_longest_common_substring_is_exact() -> None:
    assert longest_common_substring("xxabcdefyy", "zzabcdefqq") == 6
    assert longest_common_substring("abc", "") == 0
    assert longest_common_substring("a" * 300 + "b", "a" * 50) == 50


def test_control_tail_is_a_conformal_p_value_outside_and_leaves_the_item_out_inside() -> None:
    control = [0.1, 0.2, 0.3, 0.4]
    assert control_tail([0.35, 0.5, 0.0], control, in_control=False).tolist() == [2 / 5, 1 / 5, 5 / 5]
    assert control_tail(control, control, in_control=True).tolist() == [1.0, 0.75, 0.5, 0.25]


def _report(pre_answer: Callable[[str], str], control_answer: Callable[[str], str], n: int = 30) -> ProbeReport:
    """`n` items a band; each band's completion is computed from the item's true remainder."""
    items = []
    for band, start in (("pre", datetime(2023, 1, 1, tzinfo=UTC)), ("ctl", datetime(2024, 2, 1, tzinfo=UTC))):
        for index in range(n):
            text = f"first part of item {band} {index} and then the remainder holding mark{index}x here"
            items.append(_item(text, item_id=f"{band}-{index}", when=start + timedelta(days=index)))
    plan = plan_probes(items, dataset="d", split="s")
    completions = [
        ProbeCompletion(item_id=item_id, completion=(pre_answer if item_id.startswith("pre") else control_answer)(cut.remainder), attempts=1) for item_id, cut in plan.cuts.items()
    ]
    return probe_report(plan, completions, cutoff=date(2024, 1, 1), model="m")


def test_the_report_compares_bands_per_metric_and_per_item() -> None:
    # Pre-cutoff completions reproduce their remainders; control completions are unrelated.
    report = _report(lambda remainder: remainder, lambda remainder: "something else entirely")
    assert (report.n_pre_cutoff, report.n_control, report.n_failed) == (30, 30, 0)
    lev = report.comparison(LEV)
    assert lev.pre_median == 1.0 and lev.control_median < 0.3
    assert lev.share_above_control_p95 == 1.0
    assert lev.p_value < 1e-6 and lev.length_matched_p_value < 1e-6 and lev.flagged
    first = report.items[0]
    assert first.band == "pre_cutoff" and first.similarity[LEV] == 1.0 and first.above_control_p95[LEV]
    assert first.control_tail[LEV] == pytest.approx(1 / 31)
    assert "not an accusation" in report.statement and "move the decision onto items dated on or after" in report.statement
    assert "reproduces the older items more closely" in report.summary
    assert ProbeReport.model_validate_json(report.model_dump_json()) == report


def test_a_model_that_reproduces_nothing_is_not_flagged() -> None:
    report = _report(lambda remainder: "nothing like it", lambda remainder: "nothing like it")
    assert not any(comparison.flagged for comparison in report.metrics)
    assert "no sign here that the model has seen them" in report.summary


def test_failed_probes_and_small_bands_are_counted_and_warned_about() -> None:
    items = [_item(f"item number {index} has some words in it", item_id=str(index), when=WHEN + timedelta(days=300 * (index % 2))) for index in range(10)]
    plan = plan_probes(items, dataset="d", split="s")
    completions = [ProbeCompletion(item_id=str(index), completion="some words in it", attempts=1) for index in range(9)]
    completions.append(ProbeCompletion(item_id="9", error="the endpoint answered 500; gave up after 4 attempts", attempts=4))
    report = probe_report(plan, completions, cutoff=date(2024, 1, 1), model="m")
    assert report.n_failed == 1
    codes = {warning.code for warning in report.warnings}
    assert {"probe_failures", "small_control_band", "small_pre_cutoff_band"} <= codes


def test_a_completion_for_an_item_that_was_not_planned_is_refused() -> None:
    plan = plan_probes([_item()], dataset="d", split="s")
    with pytest.raises(ValueError, match="did not probe"):
        probe_report(plan, [ProbeCompletion(item_id="other", completion="x")], cutoff=date(2024, 1, 1), model="m")
