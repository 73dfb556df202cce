"""The clean control band on real CISA KEV records, where many CVEs share a description: items dated
after the cutoff that are near copies of an older item are found (and nothing else), checked
against every pair by brute force with the dedup's own fingerprints."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest

from curation.dedup.fingerprints import MinHashRecipe, sketch_texts
from curation.dedup.rules import DedupConfig
from curation.evidence.clean_band import DatedText, RecordedLink, clean_band_warning, lexical_levels, near_any, near_pre_cutoff
from curation.evidence.probe_report import probe_report
from curation.evidence.probing import plan_probes
from ingest.normalisation import normalise_text
from schemas.evidence import ProbeCompletion, ProbeItem
from tests.conftest import SHARED_DATA
from tests.support.corpora import KEV_CUTOFF, load_kev

INSTANT = datetime(KEV_CUTOFF.year, KEV_CUTOFF.month, KEV_CUTOFF.day, tzinfo=UTC)


@pytest.fixture(scope="module")
def kev() -> list[DatedText]:
    return [DatedText(record.cve_id, record.description, record.date_added) for record in load_kev(SHARED_DATA)]


def _estimated_jaccard(queries: list[DatedText], references: list[DatedText]) -> np.ndarray:
    """Every pair's MinHash estimate, by brute force (no LSH), with the dedup's recipe."""
    recipe = MinHashRecipe()
    left = np.array([sketch.hashvalues for sketch in sketch_texts([item.text for item in queries], recipe)])
    right = np.array([sketch.hashvalues for sketch in sketch_texts([item.text for item in references], recipe)])
    return np.stack([(row[None, :] == right).mean(axis=1) for row in left])


def test_the_kev_control_band_holds_no_near_duplicate_of_a_pre_cutoff_item(kev: list[DatedText]) -> None:
    near = near_pre_cutoff(kev, cutoff=KEV_CUTOFF)
    before = [item for item in kev if item.occurred_at < INSTANT]
    control = [item for item in kev if item.occurred_at >= INSTANT]
    jaccard = _estimated_jaccard(control, before)
    level = lexical_levels(DedupConfig())["minhash"]
    older_texts = {normalise_text(item.text) for item in before}
    truly_near = {item.item_id for item, row in zip(control, jaccard, strict=True) if row.max() >= level or normalise_text(item.text) in older_texts}
    assert set(near) == truly_near  # every near copy is found, and nothing else
    assert 20 <= len(near) <= 40, len(near)  # KEV repeats descriptions: a real share of the control band
    clean = [item for item, row in zip(control, jaccard, strict=True) if item.item_id not in near]
    assert len(clean) == len(control) - len(near)
    by_id = {item.item_id: item for item in kev}
    for found in near.values():
        assert by_id[found.item_id].occurred_at >= INSTANT > by_id[found.other].occurred_at
        assert found.stage in {"exact", "minhash"}
        if found.stage == "exact":
            assert normalise_text(by_id[found.item_id].text) == normalise_text(by_id[found.other].text)
        else:
            assert found.score is not None and found.score >= level
    stages = {found.stage for found in near.values()}
    assert stages == {"exact", "minhash"}


def test_unexposed_items_near_an_exposed_one_are_found_for_plain_items(kev: list[DatedText]) -> None:
    # A benchmark exposes some pre-cutoff items to a model: their twins must not count as unexposed.
    before = [item for item in kev if item.occurred_at < INSTANT]
    exposed, unexposed = before[::3], [item for index, item in enumerate(before) if index % 3]
    near = near_any(unexposed, exposed)
    exposed_texts = {normalise_text(item.text) for item in exposed}
    twins = {item.item_id for item in unexposed if normalise_text(item.text) in exposed_texts}
    assert twins and twins <= set(near)
    assert all(found.other in {item.item_id for item in exposed} for found in near.values())


def test_recorded_links_join_items_whose_words_differ_and_dates_choose_the_sides() -> None:
    day = datetime(2024, 1, 1, tzinfo=UTC)
    items = [
        DatedText("old", "the storage service dropped writes after a failover", day - timedelta(days=30)),
        DatedText("new-paraphrase", "after failing over, the storage layer lost acknowledged writes", day + timedelta(days=5)),
        DatedText("new-copy", "The  Storage service dropped writes after a failover", day + timedelta(days=6)),
        DatedText("new-other", "login page renders blank in one browser", day + timedelta(days=7)),
        DatedText("newer", "login page renders blank in one browser", day + timedelta(days=8)),
    ]
    # A stored link only reaches an item of the pool dated before the cutoff: "elsewhere" has no text at hand.
    pool = [DatedText("elsewhere", "", day - timedelta(days=400))]
    links = [RecordedLink("old", "new-paraphrase", "embedding", 0.81), RecordedLink("new-other", "elsewhere", "duplicate")]
    near = near_pre_cutoff(items, cutoff=date(2024, 1, 1), pool=pool, links=links)
    assert set(near) == {"new-paraphrase", "new-copy", "new-other"}  # "newer" copies only an item after the cutoff
    assert (near["new-copy"].stage, near["new-copy"].other) == ("exact", "old")
    assert (near["new-paraphrase"].stage, near["new-paraphrase"].score) == ("embedding", 0.81)
    assert near["new-other"].other == "elsewhere"
    assert near_any([items[1]], [items[1]]) == {}  # never near itself
    warning = clean_band_warning(near)
    assert warning is not None and warning.code == "control_near_pre_cutoff"
    assert warning.message.startswith("3 items dated on or after the cutoff were left out of the control band (")
    single = clean_band_warning({"new-copy": near["new-copy"]})
    assert single is not None and single.message.startswith("1 item dated on or after the cutoff was left out")
    assert clean_band_warning({}) is None


def test_the_report_counts_the_items_left_out_and_says_why(kev: list[DatedText]) -> None:
    near = near_pre_cutoff(kev, cutoff=KEV_CUTOFF)
    chosen = [item for item in kev if item.item_id not in near][::7]
    plan = plan_probes([ProbeItem(item_id=item.item_id, occurred_at=item.occurred_at, text=item.text) for item in chosen], dataset="kev", split="catalog", near_pre_cutoff=near)
    completions = [ProbeCompletion(item_id=item_id, completion="nothing alike", attempts=1) for item_id in plan.cuts]
    report = probe_report(plan, completions, cutoff=KEV_CUTOFF, model="m")
    assert report.n_control_near_pre_cutoff == len(near)
    assert f"; {len(near)} later items were left out of the control as near copies of older ones)" in report.summary
    assert "control_near_pre_cutoff" in {warning.code for warning in report.warnings}
    first = dict([next(iter(near.items()))])
    single = probe_report(plan_probes(list(plan.items.values()), dataset="kev", split="catalog", near_pre_cutoff=first), completions, cutoff=KEV_CUTOFF, model="m")
    assert "; 1 later item was left out of the control as a near copy of an older one)" in single.summary
