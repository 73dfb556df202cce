"""Validation errors told in words a person can act on.

A settings file with a misspelt key (`target_sise`, `approval` for `approval_policy`) must be
refused, naming the key and the nearest valid one, not taken with the default silently. The
models of such files forbid unknown keys (`extra="forbid"`); `describe_errors` turns each error of
a `pydantic.ValidationError` into `location: message`, and an unknown key into the keys valid at
its place, the nearest first. Values are never echoed (a file may hold credentials).
"""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

MAX_LISTED = 12


def _model_at(model: type[BaseModel], location: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose fields are valid at `location` (a path of field names and list indexes), or
    None where no model is known (a free-form mapping)."""
    current: Any = model
    for part in location:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return None
        current = _inner_model(current.model_fields[part].annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _inner_model(annotation: Any) -> Any:
    """The model inside `annotation` (`X`, `X | None`, `list[X]`), or the annotation itself."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = _inner_model(argument)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    return annotation


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def unknown_key_message(key: str, valid: list[str]) -> str:
    """`key` is not a valid key; the nearest of `valid`, if any is near, and the valid keys."""
    nearest = difflib.get_close_matches(key, valid, n=1, cutoff=0.6) or [name for name in valid if key in name or name in key][:1]
    hint = f"did you mean {nearest[0]!r}? " if nearest else ""
    listed = ", ".join(valid[:MAX_LISTED]) + (", ..." if len(valid) > MAX_LISTED else "")
    return f"unknown key {key!r}: {hint}valid keys here: {listed}"


def describe_errors(exc: ValidationError, model: type[BaseModel]) -> list[str]:
    """Each error of `exc` (raised validating `model`) as `location: message`."""
    described = []
    for error in exc.errors(include_input=False):
        location = tuple(error["loc"])
        where = ".".join(str(part) for part in location) or "(root)"
        if error["type"] == "extra_forbidden" and location:
            parent = _model_at(model, location[:-1])
            if parent is not None:
                described.append(f"{where}: {unknown_key_message(str(location[-1]), _keys_of(parent))}")
                continue
        described.append(f"{where}: {error['msg']}")
    return described
