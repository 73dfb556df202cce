"""Redaction on the labelled sample of dotted numbers (`tests/support/dotted_numbers.jsonl`)."""

from collections import Counter

import pytest

from ingest.redaction.redactor import Redactor
from tests.support.dotted_numbers import Figures, load, measure, redaction_touches


@pytest.fixture(scope="module")
def figures() -> Figures:
    redactor = Redactor()
    return measure(load(), redaction_touches(lambda text: redactor.redact(text).text))


def test_the_sample_covers_every_pool_and_kind() -> None:
    records = load()
    assert len(records) >= 400
    pools = Counter(record.pool for record in records)
    assert {"gitbugs_hadoop", "loghub_2k", "cisa_kev"} <= set(pools)
    kinds = Counter(record.kind for record in records if record.label == "address")
    assert {"private", "public", "shared", "loopback", "unspecified", "metadata"} <= set(kinds)
    forms = Counter(record.form for record in records if record.label == "address")
    assert {"dotted4", "dashed4", "dotted4-in-hostname"} <= set(forms)


def test_identifying_addresses_are_redacted(figures: Figures) -> None:
    misses = [(r.pool, r.string) for r in figures.groups["identifying"].misses]
    assert figures.addresses_redacted >= 0.99, misses


def test_version_strings_are_left_alone(figures: Figures) -> None:
    misses = [(r.pool, r.string) for r in figures.groups["version"].misses]
    assert figures.versions_touched <= 0.01, misses
    assert figures.non_addresses_touched <= 0.01


def test_addresses_that_identify_nobody_are_kept(figures: Figures) -> None:
    assert figures.well_known_kept >= 0.99, [(r.pool, r.string) for r in figures.groups["well-known"].misses]
