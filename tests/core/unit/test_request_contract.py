"""Request models state their rules in the OpenAPI document and enforce exactly those: booleans are
JSON booleans, dates' years lie in the stated range as written, and rules between members (one of
`eval` and `corpus`, no augmentations on a bare endpoint) are in the schema too."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from schemas.common import YEAR_PATTERN
from schemas.corpus_results import CorpusResultsPost
from schemas.evals import EvalCreate
from schemas.model_registry import OPTIONAL_URL_PATTERN, EndpointCreate, EndpointUpdate, ModelCreate
from schemas.probes import ProbeCreate
from schemas.source import SourceUpdate

STRICT_BOOLEANS: list[tuple[type[BaseModel], dict[str, Any], str]] = [
    (SourceUpdate, {}, "reset_cursor"),
    (SourceUpdate, {}, "enabled"),
    (EndpointUpdate, {}, "augmented"),
    (EndpointCreate, {"name": "e", "base_url": "https://x.test", "model": "m"}, "augmented"),
    (CorpusResultsPost, {"model": "m", "results": [{"external_id": "a", "score": 1.0}]}, "replace"),
    (ProbeCreate, {"eval": "ops", "model": "m", "endpoint": "e"}, "allow_exposure"),
]


@pytest.mark.parametrize(("model", "given", "field"), STRICT_BOOLEANS, ids=[f"{m.__name__}.{f}" for m, _, f in STRICT_BOOLEANS])
@pytest.mark.parametrize("value", [0, 1, "true", "false", "yes"])
def test_a_boolean_is_a_json_boolean(model: type[BaseModel], given: dict[str, Any], field: str, value: Any) -> None:
    assert getattr(model.model_validate({**given, field: True}), field) is True
    with pytest.raises(ValidationError, match="Input should be a valid boolean"):
        model.model_validate({**given, field: value})


@pytest.mark.parametrize(
    ("written", "taken"),
    [
        ("1900-01-01T00:30:00+01:00", True),  # 1899 in UTC, 1900 as written: the document's pattern decides
        ("8999-12-31T23:00:00-05:00", True),
        ("1899-12-31T23:59:59Z", False),
        ("9000-01-01T00:00:00Z", False),
    ],
)
def test_a_date_is_bounded_as_the_document_states(written: str, taken: bool) -> None:
    assert (re.search(YEAR_PATTERN, written) is not None) is taken
    data = {"name": "e", "base_url": "https://x.test", "model": "m", "terms_checked_at": written}
    if taken:
        EndpointCreate.model_validate(data)
    else:
        with pytest.raises(ValidationError, match="must lie between 1900-01-01 and 9000-01-01"):
            EndpointCreate.model_validate(data)


def test_rules_between_members_are_in_the_schema() -> None:
    probe = ProbeCreate.model_json_schema()
    assert [branch["required"] for branch in probe["oneOf"]] == [["eval"], ["corpus"]]
    endpoint = EndpointUpdate.model_json_schema()
    assert endpoint["not"]["required"] == ["augmented", "augmentations"]
    evals = EvalCreate.model_json_schema()
    assert evals["properties"]["source_quotas"]["additionalProperties"] is False
    assert ModelCreate.model_json_schema()["properties"]["training_cutoff"]["anyOf"][0]["pattern"] == YEAR_PATTERN


@pytest.mark.parametrize(("url", "taken"), [("", True), ("https://x.test/terms", True), ("\n", False), ("ftp://x.test", False)])
def test_an_optional_url_is_empty_or_http(url: str, taken: bool) -> None:
    assert (re.search(OPTIONAL_URL_PATTERN, url) is not None) is taken
    data = {"name": "e", "base_url": "https://x.test", "model": "m", "terms_url": url}
    if taken:
        EndpointCreate.model_validate(data)
    else:
        with pytest.raises(ValidationError, match="http:// or https://"):
            EndpointCreate.model_validate(data)
