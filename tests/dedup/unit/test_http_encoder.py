"""The `http` embedding backend's wire format: every vendor answer shape in
`tests/support/embeddings_api/` parses to the same normalised rows, answers are put back in input
order by `index`, malformed answers raise errors that say what was wrong, and the backend's URL and
model id rules."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embedding.http_encoder import EmbeddingServiceError, embeddings_url, http_model_id, parse_answer, shown_url

SHAPES = Path(__file__).resolve().parents[2] / "support" / "embeddings_api"
EXPECTED = np.array([[0.5, -0.25, 0.125, 0.8], [-0.1, 0.3, 0.9, 0.05]], dtype=np.float64)
EXPECTED /= np.linalg.norm(EXPECTED, axis=1, keepdims=True)


def _shape(name: str) -> Any:
    return json.loads((SHAPES / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["openai_answer.json", "tei_answer.json", "tei_base64_answer.json", "vllm_answer.json"])
def test_every_published_answer_shape_gives_normalised_rows_in_input_order(name: str) -> None:
    rows = parse_answer(_shape(name), count=2, dim=4)
    assert rows.dtype == np.float32 and rows.shape == (2, 4)
    assert np.allclose(rows, EXPECTED, atol=1e-6)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)


def test_the_request_shape_is_what_the_encoder_sends() -> None:
    request = _shape("openai_request.json")
    assert set(request) == {"model", "input", "encoding_format"} and request["encoding_format"] == "float"
    assert isinstance(request["input"], list) and all(isinstance(text, str) and text for text in request["input"])


def test_entries_are_put_back_in_order_by_index() -> None:
    answer = _shape("openai_answer.json")
    answer["data"].reverse()
    assert np.allclose(parse_answer(answer, count=2, dim=4), EXPECTED, atol=1e-6)
    for entry in answer["data"]:
        del entry["index"]  # no index at all: list order
    assert np.allclose(parse_answer(answer, count=2, dim=4), EXPECTED[::-1], atol=1e-6)


def _broken(change: str) -> Any:
    answer = _shape("tei_answer.json")
    data = answer["data"]
    if change == "no data":
        del answer["data"]
    elif change == "error body":
        return _shape("tei_error_429.json")
    elif change == "openai error body":
        return _shape("openai_error_429.json")
    elif change == "short":
        answer["data"] = data[:1]
    elif change == "dimension":
        data[1]["embedding"] = data[1]["embedding"][:3]
    elif change == "nan":
        data[0]["embedding"][2] = math.nan
    elif change == "infinity":
        data[1]["embedding"][0] = math.inf
    elif change == "zeros":
        data[0]["embedding"] = [0.0] * 4
    elif change == "repeated index":
        data[1]["index"] = 0
    elif change == "index out of range":
        data[1]["index"] = 2
    elif change == "strings":
        data[0]["embedding"] = ["0.5"] * 4
    elif change == "not base64":
        data[0]["embedding"] = "not base64!"
    elif change == "no embedding":
        del data[0]["embedding"]
    return answer


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("no data", "without a `data` list"),
        ("error body", "without a `data` list of embeddings (it said: Model is overloaded)"),
        ("openai error body", "Rate limit reached"),
        ("short", "answered 1 embeddings for 2 texts"),
        ("dimension", "has 3 dimensions, not the 4 configured"),
        ("nan", "non-finite"),
        ("infinity", "non-finite"),
        ("zeros", "all zeros"),
        ("repeated index", "two entries of `data` have index 0"),
        ("index out of range", "has index 2, outside 0..1"),
        ("strings", "not a list of numbers"),
        ("not base64", "not base64"),
        ("no embedding", "has no `embedding`"),
    ],
)
def test_a_malformed_answer_says_what_is_wrong(change: str, said: str) -> None:
    with pytest.raises(EmbeddingServiceError, match="the embedding server") as caught:
        parse_answer(_broken(change), count=2, dim=4)
    assert said in str(caught.value)


def test_a_body_that_is_not_an_object_has_no_data() -> None:
    with pytest.raises(EmbeddingServiceError, match="without a `data` list"):
        parse_answer([[0.1, 0.2]], count=1, dim=2)


def test_urls_and_model_ids() -> None:
    assert embeddings_url("http://tei:8080/v1") == "http://tei:8080/v1/embeddings"
    assert embeddings_url("https://api.openai.com/v1/") == "https://api.openai.com/v1/embeddings"
    assert embeddings_url("http://tei:8080/v1/embeddings") == "http://tei:8080/v1/embeddings"
    with pytest.raises(ValueError, match="http:// or https://"):
        embeddings_url("tei:8080/v1")
    assert shown_url("http://user:secret@tei:8080/v1/embeddings?key=k1") == "http://tei:8080/v1/embeddings"
    # The host and model name the vectors; a port or credentials do not.
    assert http_model_id("http://user:secret@tei:8080/v1", "all-MiniLM-L6-v2", 384) == "http:tei/all-MiniLM-L6-v2/dim384"
    assert http_model_id("http://tei:9090/v1", "all-MiniLM-L6-v2", 384) == "http:tei/all-MiniLM-L6-v2/dim384"
    assert http_model_id("http://tei/v1", "all-MiniLM-L6-v2", 768) != http_model_id("http://tei/v1", "all-MiniLM-L6-v2", 384)
    with pytest.raises(ValueError, match="longer than 255"):
        http_model_id("http://tei/v1", "m" * 300, 384)
