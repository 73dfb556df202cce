"""Settings files and bodies refuse unknown keys, naming the key, the nearest valid one and the
valid keys at its place, for evals, mappings and connector configurations alike; a credential's
value is never echoed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ingest.connectors.base import ConfigError
from ingest.connectors.registry import connector_class
from ingest.mapping import MappingError, parse_mapping
from schemas.evals import EvalCreate, EvalUpdate
from schemas.validation import describe_errors, unknown_key_message


def test_an_eval_with_a_misspelt_key_is_refused_with_the_nearest_valid_key() -> None:
    with pytest.raises(ValidationError) as raised:
        EvalCreate.model_validate({"name": "ops", "sources": ["kev"], "target_sise": 30, "approval": "manual"})
    described = describe_errors(raised.value, EvalCreate)
    assert described[0].startswith("target_sise: unknown key 'target_sise': did you mean 'target_size'?")
    assert described[1].startswith("approval: unknown key 'approval': did you mean 'approval_policy'?")
    with pytest.raises(ValidationError):
        EvalUpdate.model_validate({"schedul": "0 3 * * *"})


def test_a_key_near_nothing_lists_the_valid_keys() -> None:
    message = unknown_key_message("zzz", ["title", "input"])
    assert message == "unknown key 'zzz': valid keys here: title, input"


def test_a_mapping_and_a_connector_name_the_nearest_key_and_never_echo_a_secret() -> None:
    with pytest.raises(MappingError, match="unknown key 'titel': did you mean 'title'"):
        parse_mapping({"external_id": "id", "titel": "summary"})
    with pytest.raises(ConfigError) as raised:
        connector_class("github").parse_config({"owner": "o", "repo": "r", "token": "t", "tokn": "ghp_secretvalue"})
    assert "unknown key 'tokn': did you mean 'token'?" in str(raised.value) and "ghp_secretvalue" not in str(raised.value)
