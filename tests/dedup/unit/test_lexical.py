"""The pair form of the character n-gram similarity (`curation.dedup.lexical.pair_similarity`)
equals the vectorizer's (`lexical_similarity`) on real and awkward texts."""

from __future__ import annotations

import json
import random

import pytest

from curation.dedup.lexical import LEXICAL_CHARACTERS, lexical_similarity, pair_similarity
from tests.conftest import SHARED_DATA

AWKWARD = [
    "a",
    "ab cd",
    "x" * 3000,
    "Ошибка при запуске NameNode  после обновления",
    "编辑特别卡顿",
    "  tabs\tand\nnewlines   everywhere ",
    "NPE in FooBar.baz() at line 42 (see HADOOP-1234)",
    "!!! ??? ...",
]


def _reports(count: int) -> list[str]:
    lines = (SHARED_DATA / "gitbugs_hadoop" / "reports.jsonl").read_text(encoding="utf-8").splitlines()[:count]
    return [f"{row['title']}\n{row.get('description') or ''}" for row in map(json.loads, lines)]


def test_the_pair_form_equals_the_vectorizer_on_real_reports() -> None:
    texts = _reports(60)
    rng = random.Random(4)
    for _ in range(200):
        a, b = rng.sample(texts, 2)
        assert pair_similarity(a, b) == pytest.approx(float(lexical_similarity(a, [b])[0]), abs=1e-9)
    assert pair_similarity(texts[0], texts[0]) == pytest.approx(1.0)


@pytest.mark.parametrize("a", AWKWARD)
@pytest.mark.parametrize("b", AWKWARD)
def test_the_pair_form_equals_the_vectorizer_on_awkward_texts(a: str, b: str) -> None:
    assert pair_similarity(a, b) == pytest.approx(float(lexical_similarity(a, [b])[0]), abs=1e-9)


def test_only_the_first_characters_count() -> None:
    head = "the namenode fails to start " * 80
    assert len(head) > LEXICAL_CHARACTERS
    assert pair_similarity(head + "tail one", head + "a different tail") == pytest.approx(1.0)
