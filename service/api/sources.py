"""Sources, and pushing records into them (bearer-authenticated batches and signed webhooks)."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.engine import Engine
from sqlmodel import Session

from ingest.mapping import MappingError
from ingest.readers import DocumentError, RawRecord, iter_jsonl, iter_parsed_array
from schemas.problem import IngestSummary
from schemas.source import SourceCreate, SourceCreated, SourceRead
from service.api.deps import BodyDep, MetricsDep, SessionDep, SettingsDep
from service.auth import AdminPrincipal, IngestPrincipal, ReadPrincipal
from service.db import write_session
from service.ingestion import ingest_records
from service.metrics import Metrics
from service.problems import ProblemError, problem_doc, problem_response
from service.sources import create_source, list_sources, read_source, require_source, source_mapping, webhook_secret
from service.webhooks import SIGNATURE_HEADER, SignatureError, verify

router = APIRouter(prefix="/v1/sources", tags=["sources"])
_JSONL_TYPES = ("application/x-ndjson", "application/jsonl", "application/x-jsonlines")


@router.get("", response_model=list[SourceRead], responses=problem_doc(401, 403))
def get_sources(_: ReadPrincipal, session: SessionDep) -> list[SourceRead]:
    """List sources with their item counts."""
    return list_sources(session=session)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=SourceCreated, responses=problem_doc(401, 403, 409, 422))
def post_source(data: SourceCreate, principal: AdminPrincipal, session: SessionDep, settings: SettingsDep) -> SourceCreated:
    """Create a source; the response carries its webhook secret, shown this once only."""
    try:
        source, secret = create_source(session=session, data=data, secret_key=settings.secret_key.get_secret_value(), actor=principal.actor)
    except FileExistsError as exc:
        raise ProblemError(409, "Conflict", str(exc)) from exc
    except MappingError as exc:
        raise ProblemError(422, "Invalid mapping", str(exc)) from exc
    return SourceCreated.model_validate(read_source(session=session, source=source), update={"webhook_secret": secret})


@router.get("/{name}", response_model=SourceRead, responses=problem_doc(401, 403, 404))
def get_source(name: str, _: ReadPrincipal, session: SessionDep) -> SourceRead:
    """One source with its item count."""
    return read_source(session=session, source=require_source(session=session, name=name))


def _decode(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProblemError(400, "Bad Request", f"the body is not valid UTF-8: byte 0x{body[exc.start]:02x} at offset {exc.start}") from exc


def _parse_json(body: bytes) -> Any:
    try:
        return json.loads(_decode(body))
    except json.JSONDecodeError as exc:
        raise ProblemError(400, "Bad Request", f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def _store(engine: Engine, metrics: Metrics, name: str, records: list[RawRecord], actor: str) -> IngestSummary:
    with write_session(engine) as session:
        return _store_in(session, metrics, name, records, actor)


def _store_in(session: Session, metrics: Metrics, name: str, records: list[RawRecord], actor: str) -> IngestSummary:
    source = require_source(session=session, name=name)
    try:
        mapping = source_mapping(source)
    except MappingError as exc:
        raise ProblemError(409, "Conflict", f"the source's stored mapping is invalid: {exc}") from exc
    summary = ingest_records(session=session, source=source, records=records, mapping=mapping, actor=actor)
    metrics.record_ingest(summary)
    return summary


def _summary_response(summary: IngestSummary) -> JSONResponse:
    """200 with the summary when every record was stored; 422 problem+json naming each bad one otherwise."""
    if not summary.rejected:
        return JSONResponse(summary.model_dump(mode="json"), status_code=200)
    detail = f"{summary.rejected} of {summary.read} records were rejected and {summary.stored} stored; each rejected record is named in `errors`"
    return problem_response(
        422,
        "Some records were rejected",
        detail,
        errors=[error.model_dump(mode="json") for error in summary.errors],
        summary=summary.model_dump(mode="json", exclude={"errors"}),
    )


@router.post("/{name}/items", response_model=IngestSummary, responses=problem_doc(400, 401, 403, 404, 413, 422))
async def push_items(name: str, request: Request, body: BodyDep, principal: IngestPrincipal, metrics: MetricsDep) -> JSONResponse:
    """Push a batch: a JSON array of records (or JSON Lines), mapped through the source's mapping.

    Good records are stored even when others are rejected; the 422 answer names each bad one."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() in _JSONL_TYPES:
        _decode(body)
        records = list(iter_jsonl(body))
    else:
        document = _parse_json(body)
        if not isinstance(document, list):
            raise ProblemError(400, "Bad Request", f"expected a JSON array of records, got a JSON {type(document).__name__}")
        records = list(iter_parsed_array(document, None))
    summary = await run_in_threadpool(_store, request.app.state.engine, metrics, name, records, principal.actor)
    return _summary_response(summary)


@router.post("/{name}/webhook", response_model=IngestSummary, responses=problem_doc(400, 401, 404, 413, 422))
async def webhook(name: str, request: Request, body: BodyDep, session: SessionDep, settings: SettingsDep, metrics: MetricsDep) -> JSONResponse:
    """Receive a signed webhook (no bearer token: the HMAC-SHA256 signature in `Goldenset-Signature`
    authenticates it). A record, an array of records, or an object holding them at the mapping's `records` path."""
    source = await run_in_threadpool(require_source, session=session, name=name)
    secret = webhook_secret(source, secret_key=settings.secret_key.get_secret_value())
    if secret is None:
        raise ProblemError(401, "Unauthorized", f"source {name!r} has no webhook secret; recreate it to receive webhooks")
    try:
        verify(body, request.headers.get(SIGNATURE_HEADER), secret=secret, now=time.time(), tolerance_seconds=settings.webhook_tolerance_seconds)
    except SignatureError as exc:
        raise ProblemError(401, "Unauthorized", str(exc)) from exc
    document = _parse_json(body)
    records_path = source_mapping(source).records
    try:
        if isinstance(document, list) or (isinstance(document, dict) and records_path):
            records = list(iter_parsed_array(document, records_path if isinstance(document, dict) else None))
        elif isinstance(document, dict):
            records = [RawRecord(0, "index 0", value=document)]
        else:
            raise ProblemError(400, "Bad Request", f"expected a JSON object or array, got a JSON {type(document).__name__}")
    except DocumentError as exc:
        raise ProblemError(400, "Bad Request", str(exc)) from exc
    summary = await run_in_threadpool(_store, request.app.state.engine, metrics, name, records, f"webhook:{name}")
    return _summary_response(summary)
