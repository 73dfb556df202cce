"""A connector's configuration as form fields, and a submitted form back as a configuration
document, for the source pages. Pure: no request, no database.

Fields come from the connector's own configuration model (`config_model`), so a connector added by
a package gets a form too. Secrets (`SecretStr` fields) are write-only: never put into a page, a
blank one on an existing source keeps the stored value, a typed one replaces it. Lists are typed
comma-separated; a choice among fixed values (`Literal`) is a select; a blank optional field takes
the model's default. The document is then validated by the connector as the API validates it.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from ingest.connectors.base import ConnectorConfig


@dataclass(frozen=True)
class ConfigField:
    """One setting of a connector, as its form shows it."""

    name: str
    description: str
    required: bool
    secret: bool
    is_list: bool
    choices: tuple[str, ...]
    input_type: str  # "text", "number" or "password"


def _parts(annotation: Any) -> list[Any]:
    """The types of a union annotation (without None), or the annotation alone."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [part for part in typing.get_args(annotation) if part is not type(None)]
    return [annotation]


def config_fields(model: type[ConnectorConfig]) -> list[ConfigField]:
    """The form fields of `model`, required ones first, each in declaration order."""
    fields = []
    for name, info in model.model_fields.items():
        parts = _parts(info.annotation)
        secret = any(part is SecretStr for part in parts)
        is_list = any(typing.get_origin(part) in (list, tuple, set) or part in (list, tuple, set) for part in parts)
        choices = tuple(str(value) for part in parts if typing.get_origin(part) is typing.Literal for value in typing.get_args(part))
        numeric = any(part in (int, float) for part in parts)
        input_type = "password" if secret else "number" if numeric and not is_list else "text"
        fields.append(ConfigField(name, info.description or "", info.is_required(), secret, is_list, choices, input_type))
    return sorted(fields, key=lambda field: not field.required)


def form_values(config: ConnectorConfig | None) -> dict[str, str]:
    """What the form shows for a stored configuration: every value as text, secrets blank."""
    if config is None:
        return {}
    shown: dict[str, str] = {}
    for name, value in config.model_dump(mode="json").items():
        if isinstance(getattr(config, name), SecretStr) or value is None:
            shown[name] = ""
        elif isinstance(value, list):
            shown[name] = ", ".join(str(part) for part in value)
        else:
            shown[name] = str(value)
    return shown


def config_document(model: type[ConnectorConfig], typed: dict[str, str], stored: ConnectorConfig | None) -> dict[str, Any]:
    """The configuration document a submitted form asks for: typed values, lists split at commas,
    blank fields left to the model's defaults, and a blank secret kept from `stored` (None for a
    new source: left out)."""
    document: dict[str, Any] = {}
    for field in config_fields(model):
        text = typed.get(field.name, "").strip()
        if not text:
            if field.secret and stored is not None:
                kept = getattr(stored, field.name)
                if isinstance(kept, SecretStr):
                    document[field.name] = kept.get_secret_value()
            continue
        document[field.name] = [part.strip() for part in text.split(",") if part.strip()] if field.is_list else text
    return document
