"""The API keys a probe sends: from the request (held in memory for that probe only) or from the
environment variable `GOLDENSET_ENDPOINT_KEY_<ENDPOINT>`; never stored or logged."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, NamedTuple

from pydantic import SecretStr

from schemas.probes import ProbeCreate

KEY_VARIABLE_PREFIX = "GOLDENSET_ENDPOINT_KEY_"
ApiKeyFrom = Literal["request", "environment", "none"]


def key_variable(endpoint: str) -> str:
    """The environment variable holding an endpoint's API key: `GOLDENSET_ENDPOINT_KEY_` and the
    endpoint's name in capitals, every other character as `_` (`acme/gpt-4o` → `..._ACME_GPT_4O`)."""
    return KEY_VARIABLE_PREFIX + re.sub(r"[^A-Z0-9]", "_", endpoint.upper())


class KeySource(NamedTuple):
    """Where the endpoint's API key comes from: the environment variable read when the request
    brings none (`variable`), the key (None: none), and which of the two gave it (`api_key_from`)."""

    variable: str
    api_key: SecretStr | None
    api_key_from: ApiKeyFrom


def key_source(data: ProbeCreate, endpoint: str, environ: Mapping[str, str], *, given: SecretStr | None = None) -> KeySource:
    """The key given (default the request's `api_key`) when there is one, else that of the
    endpoint's variable (`key_variable`) in `environ`, else none."""
    variable = key_variable(endpoint)
    env_key = environ.get(variable)
    brought = given if given is not None else (data.api_key if endpoint == data.endpoint else None)
    if brought:
        return KeySource(variable, brought, "request")
    if env_key:
        return KeySource(variable, SecretStr(env_key), "environment")
    return KeySource(variable, None, "none")
