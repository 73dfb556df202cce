"""The unreadable share is measured with the configured model's own tokenizer: the bundled English
one cannot read Chinese, Russian or emoji; a vocabulary that holds a script reads it."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordPiece

from curation.dedup.readability import Unreadable, unreadable_shares
from embedding.models import default_model_path
from embedding.readability import ReadabilityMeter


@pytest.fixture(scope="module")
def meter() -> ReadabilityMeter:
    return ReadabilityMeter.from_model_folder(default_model_path(), max_seq_length=254)


def test_english_and_code_are_readable(meter: ReadabilityMeter) -> None:
    texts = ["Editor is extremely sluggish", "ModuleNotFoundError: No module named 'numpy'", "kubectl get pods -n kube-system", "", "   "]
    assert meter.shares(texts) == [0.0] * len(texts)


def test_unknown_and_spelled_out_text_is_unreadable(meter: ReadabilityMeter) -> None:
    chinese, russian, emoji, mixed = meter.shares(["编辑特别卡顿", "Редактор сильно тормозит", "🔥🔥🔥", "Terminal 终端无法打开"])
    assert chinese == 1.0  # every character an unknown token
    assert russian == 1.0  # no unknown token, but every word spelled out a letter at a time
    assert emoji == 1.0
    assert 0.3 < mixed < 1.0


def test_only_what_the_model_reads_is_measured() -> None:
    short = ReadabilityMeter.from_model_folder(default_model_path(), max_seq_length=8)
    assert short.shares(["one two three four five six seven eight nine ten 编辑特别卡顿"]) == [0.0]


def test_a_vocabulary_that_holds_the_script_reads_it() -> None:
    vocabulary = {"[UNK]": 0, "编": 1, "辑": 2, "特": 3, "别": 4, "卡": 5, "顿": 6}
    tokenizer = Tokenizer(WordPiece(vocabulary, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    assert ReadabilityMeter(tokenizer).shares(["编辑特别卡顿", "拒绝访问"]) == [0.0, 1.0]


def test_an_encoder_without_a_tokenizer_measures_nothing() -> None:
    class Plain:
        model_id, dim = "plain", 2

    assert unreadable_shares(Plain(), ["编辑特别卡顿"]) == [None]
    assert Unreadable(body=0.1, title=0.812).beyond(0.3) == {"title": 0.81}
    assert Unreadable().beyond(0.3) == {}
