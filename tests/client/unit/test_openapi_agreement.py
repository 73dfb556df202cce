"""The client cannot drift from the service: its models, compared with the components of the same
name in the app's OpenAPI document (field names, which are required, JSON types and enum values),
and its route table with the operations (every /v1 operation called, with the same answer and
body schemas). Both clients call every route."""

from __future__ import annotations

import asyncio
import collections.abc
import inspect
import json
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from goldenset_client import AsyncClient, Client, models, routes
from goldenset_client._operations import operation
from goldenset_client.operations import Operations
from pydantic import BaseModel, TypeAdapter

from service.app import create_app
from service.core.db import make_engine
from tests.conftest import make_settings

SKIPPED_OPERATIONS = {("POST", "/v1/sources/{name}/webhook")}
"""A vendor's delivery endpoint, authenticated by the source's signature, not a token."""
UNNAMED_ANSWERS = {("POST", "/v1/sources/{name}/pull"): {"IngestSummary", "PullStarted"}}
"""Operations whose answer the document leaves unnamed, and the models the client reads them as."""
CLIENT_ONLY_MODELS = {"PullStarted"}
SCHEMAS = "#/components/schemas/"


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    url = f"sqlite:///{tmp_path_factory.mktemp('openapi') / 'unused.db'}"
    engine = make_engine(url)
    try:
        return create_app(make_settings(url), engine=engine).openapi()
    finally:
        engine.dispose()


# --- comparing schemas -----------------------------------------------------------------------------


def shape(schema: dict[str, Any], components: dict[str, Any]) -> Any:
    """A schema's JSON type, comparable across documents: named objects by name, enums by their
    values, unions as sets, strings with their date formats; descriptions and defaults ignored."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(SCHEMAS).removeprefix("#/$defs/")
        target = components.get(name, {})
        return ("enum", tuple(sorted(target["enum"]))) if "enum" in target else ("object", name)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options: set[Any] = set()
            for option in schema[key]:
                found = shape(option, components)
                options.update(found if isinstance(found, frozenset) else {found})
            return next(iter(options)) if len(options) == 1 else frozenset(options)
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return shape(schema["allOf"][0], components)
    if "enum" in schema:
        return ("enum", tuple(sorted(schema["enum"])))
    kind = schema.get("type")
    if kind == "array":
        return ("array", shape(schema.get("items", {}), components))
    if kind == "string":
        return ("string", schema.get("format") if schema.get("format") in {"date", "date-time"} else None)
    return (kind or "any",)


def fields(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """An object schema as `{field: (required, shape)}`."""
    required = set(schema.get("required", []))
    return {name: (name in required, shape(member, components)) for name, member in schema.get("properties", {}).items()}


def client_schema(model: type[BaseModel]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A client model's own JSON schema and its definitions."""
    schema = model.model_json_schema(ref_template=SCHEMAS + "{model}")
    return schema, schema.pop("$defs", {})


def disagreements(model: type[BaseModel], components: dict[str, Any]) -> list[str]:
    """How the client `model` differs from the component of its name (empty: they agree)."""
    name = model.__name__
    if name not in components:
        return [f"{name}: no such component"]
    theirs = fields(components[name], components)
    schema, defs = client_schema(model)
    ours = fields(schema, {**defs, **{key: value for key, value in components.items() if key not in defs}})
    problems = [f"{name}.{field}: missing from the client" for field in sorted(theirs.keys() - ours.keys())]
    problems += [f"{name}.{field}: not in the service" for field in sorted(ours.keys() - theirs.keys())]
    for field in sorted(theirs.keys() & ours.keys()):
        if theirs[field] != ours[field]:
            problems.append(f"{name}.{field}: service (required, type) {theirs[field]} != client {ours[field]}")
    return problems


def client_models() -> Iterator[type[BaseModel]]:
    for name in models.__all__:
        value = getattr(models, name)
        if isinstance(value, type) and issubclass(value, BaseModel) and name not in CLIENT_ONLY_MODELS:
            yield value


def client_enums() -> dict[str, tuple[str, ...]]:
    return {name: tuple(sorted(typing.get_args(value))) for name in models.__all__ if typing.get_origin(value := getattr(models, name)) is typing.Literal}


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, methods in document["paths"].items()
        if path.startswith("/v1/")
        for method, operation in methods.items()
        if (method.upper(), path) not in SKIPPED_OPERATIONS
    }


def referenced(value: Any, components: dict[str, Any], found: set[str]) -> set[str]:
    """Every component `value` refers to, directly or through other components."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith(SCHEMAS) and (name := ref.removeprefix(SCHEMAS)) not in found:
            found.add(name)
            referenced(components[name], components, found)
        for member in value.values():
            referenced(member, components, found)
    elif isinstance(value, list):
        for member in value:
            referenced(member, components, found)
    return found


def answer_shape(route: routes.Route[Any]) -> Any:
    """What the client reads an answer as, in `shape` terms."""
    if route.answer is bytes:
        return "image"
    if route.answer is routes.NONE:
        return None
    return type_shape(route.answer)


def type_shape(annotation: Any) -> Any:
    """A Python type (a model, a list of them, a plain container) in `shape` terms."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return ("object", annotation.__name__)
    if typing.get_origin(annotation) is list:
        return ("array", type_shape(typing.get_args(annotation)[0]))
    return shape(TypeAdapter(annotation).json_schema(), {})


def documented_answers(operation: dict[str, Any], components: dict[str, Any]) -> set[Any]:
    """The shapes of an operation's success answers (`"image"` for a chart, None for no body)."""
    found: set[Any] = set()
    for status, response in operation["responses"].items():
        if not status.startswith("2"):
            continue
        content = response.get("content") or {}
        if not content:
            found.add(None)
        for media, body in content.items():
            if media.startswith("image/"):
                found.add("image")
            elif body.get("schema"):
                found.add(shape(body["schema"], components))
    return found


def plain(found: Any) -> Any:
    """An object shape's name (enums, unnamed objects and others unchanged), to compare with the
    component names."""
    return found[1] if isinstance(found, tuple) and len(found) == 2 and found[0] == "object" else found


# --- the checks -------------------------------------------------------------------------------------


def test_every_client_model_agrees_with_its_component(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    problems = [problem for model in client_models() for problem in disagreements(model, components)]
    assert problems == []


def test_every_enumeration_agrees(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    ours = client_enums()
    assert {name: values for name, values in ours.items() if tuple(sorted(components.get(name, {}).get("enum", []))) != values} == {}


def test_every_component_the_api_uses_has_a_client_model(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    used = referenced([operation for operation in operations(document).values()], components, set())
    ours = {model.__name__ for model in client_models()} | set(client_enums())
    assert sorted(used - ours - {"Problem"}) == []
    assert "ExportRow" in used and "EndpointRead" in used


def test_every_v1_operation_has_a_route_with_the_same_answer_and_body(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    documented = operations(document)
    table = {(route.method, route.path) for route in routes.ROUTES}
    assert sorted(documented.keys() - table) == [], "operations no client method calls"
    assert sorted(table - documented.keys()) == [], "routes the service does not have"
    for route in routes.ROUTES:
        operation = documented[(route.method, route.path)]
        answers = {plain(found) for found in documented_answers(operation, components)}
        ours = plain(answer_shape(route))
        if (route.method, route.path) in UNNAMED_ANSWERS:
            assert ours in UNNAMED_ANSWERS[(route.method, route.path)], route
        else:
            assert ours in answers, f"{route}: the client reads {ours}, the service answers {answers}"
        body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if route.body is None:
            assert body is None, f"{route}: the service takes a body the client does not send"
        else:
            assert body is not None and type_shape(route.body) in _options(shape(body, components)), route


def _options(found: Any) -> set[Any]:
    """A body shape and, for an optional body (`X | null`), X alone."""
    if isinstance(found, frozenset):
        return {found, *(option for option in found if option != ("null",))}
    return {found}


def client_source(cls: type) -> str:
    """The source of every goldenset_client module `cls` takes methods from: its own and its bases'."""
    modules = {base.__module__: base for base in cls.__mro__ if base.__module__.startswith("goldenset_client.")}
    return "".join(Path(inspect.getfile(base)).read_text(encoding="utf-8") for base in modules.values())


def public_methods(client: object) -> dict[str, Any]:
    """A client's public methods, bound."""
    return {name: member for name in dir(client) if not name.startswith("_") and callable(member := getattr(client, name))}


def answer(signature: inspect.Signature) -> Any:
    """A method's return annotation, an iterator's and an async iterator's alike (`iter_*`), and
    each client's own type (`from_env`) alike."""
    found = signature.return_annotation
    if isinstance(found, typing.TypeVar) and isinstance(found.__bound__, typing.ForwardRef) and found.__bound__.__forward_arg__ in {"Client", "AsyncClient"}:
        return "the client"
    if typing.get_origin(found) in {collections.abc.Iterator, collections.abc.AsyncIterator}:
        return ("iterator", typing.get_args(found))
    return found


def test_both_clients_call_every_route_and_have_the_same_methods() -> None:
    for cls in (Client, AsyncClient):
        assert issubclass(cls, Operations)
        called = set(re.findall(r"routes\.([A-Z_]+)\.call\(", client_source(cls)))
        assert sorted(name for name, value in vars(routes).items() if isinstance(value, routes.Route) and name not in called) == [], cls.__name__

    sync_client, async_client = Client("http://127.0.0.1:1", "token"), AsyncClient("http://127.0.0.1:1", "token")
    try:
        ours, theirs = public_methods(sync_client), public_methods(async_client)
        shared = {name for name, member in vars(Operations).items() if isinstance(member, operation)}
        assert shared <= ours.keys()
        assert sorted(ours) == sorted(name for name in theirs if name != "aclose")
        for name, method in ours.items():
            signature, other = inspect.signature(method, eval_str=True), inspect.signature(theirs[name], eval_str=True)
            assert list(signature.parameters.values()) == list(other.parameters.values()), name
            assert answer(signature) == answer(other), name
            if name != "from_env":
                assert not (inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method)), name
                assert inspect.iscoroutinefunction(theirs[name]) or inspect.isasyncgenfunction(theirs[name]), name
        for name in shared:
            built = inspect.signature(vars(Operations)[name].build, eval_str=True)
            (sent,) = typing.get_args(built.return_annotation)
            for method in (ours[name], theirs[name]):
                signature = inspect.signature(method, eval_str=True)
                assert signature.parameters == built.parameters and signature.return_annotation == (None if sent is type(None) else sent), name
                assert method.__name__ == name and method.__doc__ == vars(Operations)[name].__doc__, name
    finally:
        sync_client.close()
        asyncio.run(async_client.close())


def test_the_check_fails_when_a_server_schema_changes(document: dict[str, Any]) -> None:
    changed = json.loads(json.dumps(document["components"]["schemas"]))
    del changed["EndpointRead"]["properties"]["augmentations"]
    changed["RunRead"]["properties"]["release"] = {"type": "string"}
    changed["RunRead"]["required"].remove("canary")
    changed["ExportRow"]["properties"]["weight"] = {"type": "number"}
    changed["ExportRow"]["required"].append("weight")
    assert disagreements(models.EndpointRead, changed) == ["EndpointRead.augmentations: not in the service"]
    assert sorted(disagreements(models.RunRead, changed)) == [
        "RunRead.canary: service (required, type) (False, ('string', None)) != client (True, ('string', None))",
        "RunRead.release: service (required, type) (True, ('string', None)) != client (True, ('integer',))",
    ]
    assert disagreements(models.ExportRow, changed) == ["ExportRow.weight: missing from the client"]
    changed["TrainsOnInputs"]["enum"].append("sometimes")
    assert [problem.split(":")[0] for problem in disagreements(models.EndpointCreate, changed)] == ["EndpointCreate.trains_on_inputs"]


def test_answers_ignore_unknown_members_and_requests_refuse_them() -> None:
    row = {
        "id": 1, "source": "s", "external_id": "e", "occurred_at": "2024-01-01T00:00:00Z", "title": "t", "input": "i", "reference": "r", "tags": [],
        "split": "dev", "content_digest": "d", "metadata": {"canary": "c", "eval": "ops", "release": 1, "item": '{"k": 1}', "new": True}, "added_later": 1,
    }  # fmt: skip
    parsed = models.ExportRow.model_validate(row)
    assert parsed.item_metadata() == {"k": 1} and not hasattr(parsed, "added_later")
    with pytest.raises(ValueError, match="extra"):
        models.ResultIn.model_validate({"item_id": 1, "score": 1.0, "grade": "A"})
