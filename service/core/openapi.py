"""The OpenAPI document: FastAPI's, completed so that it states every answer the service gives.

Every error answer is an RFC 9457 problem (`application/problem+json`, schema `Problem`); so is
FastAPI's own 422, which its default document describes as plain JSON. Every operation that needs
a token documents 401 and names the bearer scheme; public ones (health, signed webhooks) say they
need none. Every operation but health documents 429 (an address refused too often, or a rate
limit of its own). Operations with a body document 400 (a body that is not UTF-8 JSON), 413 (the
body limit), 415 (an encoded body, or a media type they do not read) and 422; operations with a
path parameter document 404. Every operation documents 503: the
database is unreachable, or its connection was lost mid-request (`service.core.disconnects`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from schemas.problem import Problem
from schemas.release import ExportRow
from service.core.problems import HTTP_METHODS, PROBLEM_MEDIA_TYPE, problem_descriptions

LINE_SCHEMAS: dict[str, type[BaseModel]] = {"/v1/evals/{name}/releases/{ref}/export.jsonl": ExportRow}
"""JSON Lines answers, by path, and the model of each of their lines."""
JSONL_MEDIA_TYPE = "application/x-ndjson"
HEALTH = ("get", "/healthz")
PUBLIC_OPERATIONS = {HEALTH, ("post", "/v1/sources/{name}/webhook")}
UNUSED_SCHEMAS = ("HTTPValidationError", "ValidationError")


def _problem(code: str, descriptions: dict[int, str], existing: dict[str, Any] | None) -> dict[str, Any]:
    description = (existing or {}).get("description") or descriptions.get(int(code), "Error.")
    return {"description": description, "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}}


def _line_schemas(document: dict[str, Any], schemas: dict[str, Any]) -> None:
    """JSON Lines answers name the schema of one line (`LINE_SCHEMAS`): each line's model goes into
    the components, and the media type's schema refers to it."""
    for path, model in LINE_SCHEMAS.items():
        operation = document.get("paths", {}).get(path, {}).get("get")
        if operation is None:
            continue
        definition = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, nested in definition.pop("$defs", {}).items():
            schemas.setdefault(name, nested)
        schemas[model.__name__] = definition
        answer = operation.setdefault("responses", {}).setdefault("200", {"description": "JSON Lines."})
        answer["content"] = {JSONL_MEDIA_TYPE: {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document with the problems, statuses and security stated in full."""
    document = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
    components = document.setdefault("components", {})
    components.setdefault("schemas", {})["Problem"] = Problem.model_json_schema()
    _line_schemas(document, components["schemas"])
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    document["security"] = [{"bearer": []}]
    descriptions = problem_descriptions()
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            if method not in HTTP_METHODS:
                continue
            responses: dict[str, Any] = operation.setdefault("responses", {})
            wanted = {"422", "503"}
            if (method, path) in PUBLIC_OPERATIONS:
                operation["security"] = []
            else:
                wanted.add("401")
            if (method, path) != HEALTH:
                wanted.add("429")
            if "requestBody" in operation:
                wanted |= {"400", "413", "415"}
            if "{" in path:
                wanted.add("404")
            for code in wanted | {code for code in responses if code[:1] in ("4", "5")}:
                responses[code] = _problem(code, descriptions, responses.get(code))
    schemas = components["schemas"]
    for name in UNUSED_SCHEMAS:
        schemas.pop(name, None)
    return document
