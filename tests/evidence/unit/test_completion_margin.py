"""The completion test's margin: a completion is compared with its own item's remainder and with
the remainders of the nearest-length items of its band. A clean model that writes each band's
common phrasing, or stops early on newer items, moves plain similarity between the bands and not
the margin; a model that reproduces its items moves both."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta

import pytest

from curation.evidence.completion_margin import levenshtein_margins, margins_by_band, nearest_by_length, prefix_words, without_words
from curation.evidence.probe_report import probe_report
from curation.evidence.probing import plan_probes
from schemas.evidence import ProbeCompletion, ProbeItem
from schemas.probe_tests import ProbeMetric

CUTOFF = date(2024, 1, 1)
WORDS = ["router", "switch", "kernel", "driver", "parser", "module", "gateway", "console", "plugin", "service", "daemon", "client", "portal", "agent", "loader"]
ACTIONS = ["read", "files", "write", "memory", "run", "code", "leak", "tokens", "bypass", "checks", "crash", "hosts", "escalate", "rights"]


def test_the_nearest_lengths_are_found_walking_out_from_each_item() -> None:
    lengths = [10, 50, 12, 11, 40, 13]
    found = nearest_by_length(lengths, count=2)
    assert found[0] == [3, 2]  # 11 then 12 (a tie with nothing: the nearer first)
    assert sorted(found[1]) == [4, 5]  # 40, then 13 is 37 away
    assert all(index not in others for index, others in enumerate(found))
    assert nearest_by_length([5, 6], count=8) == [[1], [0]]
    assert nearest_by_length([7], count=8) == [[]]


def test_a_reproduced_remainder_stands_out_and_a_shared_phrase_or_nothing_does_not() -> None:
    remainders = [f"allows remote attackers to {ACTIONS[k]} {ACTIONS[k + 1]} via the {WORDS[k]} {WORDS[k + 1]}" for k in range(8)]
    prefixes = [f"Acme {WORDS[k]}: the {WORDS[k]} service" for k in range(8)]
    exact = levenshtein_margins(remainders, remainders, prefixes)
    assert min(exact) > 0.25  # the template they share is most of each remainder
    generic = levenshtein_margins(["allows remote attackers to run code via the"] * 8, remainders, prefixes)
    assert abs(sum(generic) / len(generic)) < 0.1 and max(generic) < 0.3  # about as close to its own as to the others, far below a reproduction
    assert levenshtein_margins([""] * 8, remainders, prefixes) == [0.0] * 8
    assert levenshtein_margins(["alone"], ["alone"], ["shown"]) == [1.0]  # nothing to compare with
    with pytest.raises(ValueError, match="one entry per item"):
        levenshtein_margins(["a"], ["a", "b"], ["p"])


def test_words_the_model_was_shown_earn_nothing() -> None:
    """Each remainder repeats the product its prefix named; a model that copies the product name
    from its prompt is as close to its own remainder as to the others', once the prefix's words are
    left out; one that writes the rest of its item still stands out."""
    products = [f"{WORDS[k]}{k}" for k in range(8)]
    prefixes = [f"Acme {product}: the" for product in products]
    remainders = [f"{product} lets attackers {ACTIONS[k]} {ACTIONS[(k + 3) % len(ACTIONS)]} remotely" for k, product in enumerate(products)]
    copied = levenshtein_margins([f"{product} is affected" for product in products], remainders, prefixes)
    assert max(abs(margin) for margin in copied) < 0.1
    assert min(levenshtein_margins(remainders, remainders, prefixes)) > 0.2
    assert without_words("Acme Router: the router's flaw", prefix_words("acme ROUTER")) == "the router's flaw"
    # A remainder made only of words the prefix gave leaves nothing to reproduce.
    assert levenshtein_margins(["x y", "z"], ["alpha beta", "gamma"], ["alpha beta", "delta"])[0] == 0.0


def test_margins_are_taken_within_each_band() -> None:
    answers, remainders, prefixes = ["aaaa", "bbbb", "aaaa", "bbbb"], ["aaaa", "bbbb", "aaaa", "bbbb"], ["p"] * 4
    # Within a band holding only copies of its own remainder, a faithful completion has no margin.
    assert margins_by_band(answers, remainders, prefixes, [True, False, True, False]) == [0.0] * 4
    assert margins_by_band(answers, remainders, prefixes, [True, True, False, False]) == [1.0] * 4


def _bands(count: int, rng: random.Random) -> list[ProbeItem]:
    """Older items phrased one way, newer items another (a drifting corpus), all of one length range."""
    items = []
    for index in range(count):
        older = index % 2 == 0
        words = [rng.choice(WORDS) for _ in range(6)]
        action = " ".join(rng.sample(ACTIONS, 3))
        if older:
            text = f"{words[0]} {words[1]}: the {words[2]} {words[3]} allows remote attackers to execute arbitrary code via a crafted {words[4]} {action}"
        else:
            text = f"{words[0]} {words[1]}: the {words[2]} {words[3]} contains an improper input validation flaw in the {words[4]} {words[5]} {action}"
        when = datetime(2023, 6, 1, tzinfo=UTC) if older else datetime(2024, 6, 1, tzinfo=UTC)
        items.append(ProbeItem(item_id=f"i{index}", occurred_at=when + timedelta(hours=index), text=text))
    return items


def test_a_clean_model_on_a_drifting_corpus_is_flagged_by_plain_similarity_and_not_by_the_margin() -> None:
    """The clean model knows the older phrasing (it writes it after any older prefix) and stops at
    once on newer items: plain Levenshtein sees older items "remembered"; the margin sees that its
    text fits every older item as well as its own. A model that reproduces each older item is
    flagged by both."""
    items = _bands(120, random.Random(5))
    plan = plan_probes(items, dataset="d", split="s")
    phrase = "allows remote attackers to execute arbitrary code via a crafted"

    def answer(item: ProbeItem, remembers: bool) -> str:
        if item.occurred_at.date() >= CUTOFF:
            return ""
        return plan.cuts[item.item_id].remainder if remembers else phrase

    clean = probe_report(plan, [ProbeCompletion(item_id=item.item_id, completion=answer(item, False)) for item in items], cutoff=CUTOFF, model="clean")
    by_metric = {metric.metric: metric for metric in clean.metrics}
    assert by_metric[ProbeMetric.LEVENSHTEIN].flagged
    assert not by_metric[ProbeMetric.LEVENSHTEIN_MARGIN].flagged
    assert clean.primary_metric == ProbeMetric.LEVENSHTEIN_MARGIN and not clean.metrics[0].flagged

    seen = probe_report(plan, [ProbeCompletion(item_id=item.item_id, completion=answer(item, True)) for item in items], cutoff=CUTOFF, model="seen")
    assert all(metric.flagged for metric in seen.metrics)
    assert {entry.item_id: entry.similarity[ProbeMetric.LEVENSHTEIN_MARGIN] for entry in seen.items if entry.band == "pre_cutoff"}.keys() == {
        item.item_id for item in items if item.occurred_at.date() < CUTOFF
    }
