"""Sources, and pushing records into them (bearer-authenticated batches and signed webhooks)."""

from __future__ import annotations

import codecs
import json
import time
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.engine import Engine
from sqlmodel import Session
from starlette.datastructures import Headers

from ingest.connectors.base import ConfigError, ConnectorError
from ingest.connectors.registry import UnknownConnector
from ingest.mapping import Mapping, MappingError
from ingest.readers import DocumentError, RawRecord, iter_jsonl, iter_parsed_array
from ingest.sanity import Unreadable, loads
from schemas.common import utcnow
from schemas.problem import IngestSummary
from schemas.source import ConnectionTestResult, Source, SourceCreate, SourceCreated, SourceRead, SourceUpdate
from service.core.admission import before_body, public
from service.core.auth import AdminPrincipal, IngestPrincipal, ReadPrincipal
from service.core.db import write_transaction
from service.core.deps import BodyDep, MetricsDep, SessionDep, SettingsDep, WriteSessionDep, hand_back_connection
from service.core.metrics import Metrics
from service.core.problems import ProblemError, problem_doc, problem_response
from service.core.settings import Settings
from service.sources.connection_test import run_connection_test
from service.sources.definitions import (
    PLAIN_KINDS,
    create_source,
    delete_source,
    list_sources,
    read_source,
    require_source,
    source_mapping,
    update_source,
)
from service.sources.ingestion import ingest_records
from service.sources.pulls import source_status
from service.sources.requested_pulls import curate_if_stored, pull_now, start_pull
from service.sources.webhooks import (
    MAX_HEADER_LENGTH,
    SIGNATURE_HEADER,
    SignatureError,
    authenticate,
    claim_delivery,
    delivery_digest,
    forget_delivery,
    parse_header,
)

router = APIRouter(prefix="/v1/sources", tags=["sources"])
_RECORD = {"type": "object", "description": "One record, shaped as the source's mapping expects."}
_JSONL_TYPES = ("application/x-ndjson", "application/jsonl", "application/x-jsonlines")
_LINES = {"schema": {"type": "string", "description": "One JSON record a line."}}
# The batch routes read their raw body (so that a bad record costs only itself); the document says what it holds.
BATCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "array", "items": _RECORD}},
            **{media_type: _LINES for media_type in _JSONL_TYPES},
        },
    }
}
WEBHOOK_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"anyOf": [_RECORD, {"type": "array", "items": _RECORD}]}}},
        "description": "Signed with the source's secret in the `Goldenset-Signature` header.",
    }
}


@router.get("", response_model=list[SourceRead], responses=problem_doc(401, 403))
def get_sources(_: ReadPrincipal, session: SessionDep) -> list[SourceRead]:
    """List sources with their item counts."""
    return list_sources(session=session)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=SourceCreated, responses=problem_doc(401, 403, 409, 422, 503))
def post_source(data: SourceCreate, principal: AdminPrincipal, session: WriteSessionDep, settings: SettingsDep) -> SourceCreated:
    """Create a source; the response carries its webhook secret, shown this once only. 409 when
    the name is taken (by a request racing this one too)."""
    try:
        source, secret = create_source(session=session, data=data, secret_key=settings.secret_key.get_secret_value(), actor=principal.actor)
    except FileExistsError as exc:
        raise ProblemError(409, "Conflict", str(exc)) from exc
    except MappingError as exc:
        raise ProblemError(422, "Invalid mapping", str(exc), reason="invalid_mapping") from exc
    except (ConfigError, UnknownConnector) as exc:
        raise ProblemError(422, "Invalid connector", str(exc), reason="invalid_connector") from exc
    return SourceCreated.model_validate(read_source(session=session, source=source), update={"webhook_secret": secret})


@router.get("/{name}", response_model=SourceRead, responses=problem_doc(401, 403, 404))
def get_source(name: str, _: ReadPrincipal, session: SessionDep) -> SourceRead:
    """One source: its item count, and for pull sources the last run, last error and items pulled."""
    return read_source(session=session, source=require_source(session=session, name=name))


@router.patch("/{name}", response_model=SourceRead, responses=problem_doc(401, 403, 404, 422))
def patch_source(name: str, data: SourceUpdate, principal: AdminPrincipal, session: WriteSessionDep, settings: SettingsDep) -> SourceRead:
    """Change a source's mapping, connector configuration (whole with `connector`, or only the keys
    named in `connector_settings`; credentials included), pull interval or enabled flag, or reset
    its cursor; a connector change clears `auth_failed`. `goldenset source configure` does the same."""
    source = require_source(session=session, name=name)
    try:
        update_source(session=session, source=source, data=data, secret_key=settings.secret_key.get_secret_value(), actor=principal.actor)
    except MappingError as exc:
        raise ProblemError(422, "Invalid mapping", str(exc), reason="invalid_mapping") from exc
    except ConfigError as exc:
        raise ProblemError(422, "Invalid connector", str(exc), reason="invalid_connector") from exc
    return read_source(session=session, source=source)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=problem_doc(401, 403, 404, 409))
def remove_source(name: str, principal: AdminPrincipal, session: WriteSessionDep) -> None:
    """Delete a source that holds no items (items stay in dedup history: disable the source instead)."""
    try:
        delete_source(session=session, source=require_source(session=session, name=name), actor=principal.actor)
    except FileExistsError as exc:
        raise ProblemError(409, "Conflict", str(exc)) from exc


@router.post("/{name}/pull", responses={**problem_doc(401, 403, 404, 409, 502), 202: {"description": "The pull started; follow it with GET /v1/sources/{name}."}})
def pull(name: str, request: Request, principal: IngestPrincipal, session: SessionDep, wait: bool = False) -> JSONResponse:
    """Pull a connector source now. By default the pull runs in the background (202); `wait=true`
    answers when it ends, with its summary, or with the error that stopped it (502)."""
    source = require_source(session=session, name=name)
    if source.kind in PLAIN_KINDS:
        raise ProblemError(409, "Conflict", f"source {name!r} is a {source.kind} source; only connector sources are pulled")
    hand_back_connection(session)  # the pull reads and writes on connections of its own
    if wait:
        try:
            summary = pull_now(request, name, principal.actor)
        except ConnectorError as exc:
            raise ProblemError(502, "Pull failed", str(exc), source_status=source_status(request.app.state.engine, name)) from exc
        return JSONResponse(summary.model_dump(mode="json", exclude={"errors"}) | {"errors": [e.model_dump(mode="json") for e in summary.errors]})
    start_pull(request, name, principal.actor)
    return JSONResponse({"status": "started", "source": name, "follow": f"/v1/sources/{name}"}, status_code=202)


@router.post("/{name}/test", response_model=ConnectionTestResult, responses=problem_doc(401, 403, 404, 409))
def connection_test(name: str, request: Request, principal: AdminPrincipal, settings: SettingsDep) -> ConnectionTestResult:
    """Test a connector source's connection: read one page from its vendor with the stored settings
    and credentials, store nothing, and answer how it went (`ok`, or the outcome with what to
    change), within about 10 s, waiting for no rate limit; audited as `source.test`. The answer is
    200 whatever the vendor said; 409 for a source without a connector."""
    return run_connection_test(engine=request.app.state.engine, name=name, secret_key=settings.secret_key.get_secret_value(), actor=principal.actor)


def _decode(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProblemError(400, "Bad Request", f"the body is not valid UTF-8: byte 0x{body[exc.start]:02x} at offset {exc.start}") from exc


def _parse_json(body: bytes) -> Any:
    """The body as JSON (after a UTF-8 byte order mark, if any); one value nested too deeply, an
    unreadably long integer or an object with a repeated key costs only the record holding it (see
    `ingest.sanity.loads`)."""
    try:
        return loads(_decode(body.removeprefix(codecs.BOM_UTF8)))
    except json.JSONDecodeError as exc:
        raise ProblemError(400, "Bad Request", f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def _store(engine: Engine, metrics: Metrics, name: str, records: list[RawRecord], actor: str) -> IngestSummary:
    """Store `records` into the source called `name`: it is read in a session of its own, and the
    records are written in units of work of their own, chunk by chunk (`ingest_records`)."""
    with Session(engine) as session:
        source = require_source(session=session, name=name)
        mapping = _mapping_of(source)
    summary = ingest_records(units=partial(write_transaction, engine), source=source, records=records, mapping=mapping, actor=actor)
    metrics.record_ingest(summary)
    return summary


def _mapping_of(source: Source) -> Mapping:
    try:
        return source_mapping(source)
    except MappingError as exc:
        raise ProblemError(409, "Conflict", f"the source's stored mapping is invalid: {exc}") from exc


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


@router.post("/{name}/items", response_model=IngestSummary, responses=problem_doc(400, 401, 403, 404, 413, 422), openapi_extra=BATCH_BODY)
async def push_items(name: str, request: Request, body: BodyDep, principal: IngestPrincipal, metrics: MetricsDep) -> JSONResponse:
    """Push a batch: a JSON array of records (or JSON Lines), mapped through the source's mapping.

    Good records are stored even when others are rejected; the 422 answer names each bad one (a
    JSON Lines line that is not UTF-8 or not JSON is one bad record, named by its line)."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() in _JSONL_TYPES:
        records = list(iter_jsonl(body.removeprefix(codecs.BOM_UTF8)))
    else:
        document = _parse_json(body)
        if not isinstance(document, list):
            raise ProblemError(400, "Bad Request", f"expected a JSON array of records, got a JSON {type(document).__name__}")
        records = list(iter_parsed_array(document, None))
    summary = await run_in_threadpool(_store, request.app.state.engine, metrics, name, records, principal.actor)
    curate_if_stored(request, summary)
    return _summary_response(summary)


def _authenticate(session: Session, name: str, body: bytes, header: str | None, settings: Settings) -> tuple[Source, int]:
    try:
        secret_key = settings.secret_key.get_secret_value()
        return authenticate(session=session, name=name, body=body, header=header, secret_key=secret_key, now=time.time(), tolerance_seconds=settings.webhook_tolerance_seconds)
    except SignatureError as exc:
        raise ProblemError(401, "Unauthorized", str(exc)) from exc


def _claim(engine: Engine, source_id: int, digest: str, timestamp: int, tolerance_seconds: int) -> bool:
    with write_transaction(engine) as session:
        return claim_delivery(session=session, source_id=source_id, digest=digest, timestamp=timestamp, now=utcnow(), tolerance_seconds=tolerance_seconds)


def _forget(engine: Engine, source_id: int, digest: str) -> None:
    with write_transaction(engine) as session:
        forget_delivery(session=session, source_id=source_id, digest=digest)


def _webhook_records(body: bytes, records_path: str | None) -> list[RawRecord]:
    document = _parse_json(body)
    if isinstance(document, Unreadable):
        raise ProblemError(422, "Invalid request", f"the body {document.detail}")
    try:
        if isinstance(document, list) or (isinstance(document, dict) and records_path):
            return list(iter_parsed_array(document, records_path if isinstance(document, dict) else None))
        if isinstance(document, dict):
            return [RawRecord(0, "index 0", value=document)]
    except DocumentError as exc:
        raise ProblemError(400, "Bad Request", str(exc)) from exc
    raise ProblemError(400, "Bad Request", f"expected a JSON object or array, got a JSON {type(document).__name__}")


def _signature(
    goldenset_signature: Annotated[
        str, Header(alias=SIGNATURE_HEADER, max_length=MAX_HEADER_LENGTH, description="`t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.' + body>`; several `v1=` while rotating.")
    ],
) -> str:
    return goldenset_signature


def _well_formed_signature(headers: Headers) -> None:
    """Refuse (401) a webhook whose signature header is missing or malformed before its body is read."""
    try:
        parse_header(headers.get(SIGNATURE_HEADER))
    except SignatureError as exc:
        raise ProblemError(401, "Unauthorized", str(exc)) from exc


before_body(_signature, _well_formed_signature)
SignatureDep = Annotated[str, Depends(_signature)]


@router.post(
    "/{name}/webhook",
    response_model=IngestSummary,
    responses=problem_doc(400, 401, 409, 413, 422),
    openapi_extra=WEBHOOK_BODY,
    dependencies=[Depends(public())],
)
async def webhook(name: str, request: Request, signature: SignatureDep, body: BodyDep, session: SessionDep, settings: SettingsDep, metrics: MetricsDep) -> JSONResponse:
    """Receive a signed webhook (no bearer token: the HMAC-SHA256 signature in `Goldenset-Signature`
    authenticates it). A record, an array of records, or an object holding them at the mapping's `records` path.

    An unknown source gets the same 401 as a wrong signature. A delivery accepted once (the same
    timestamp and body) is refused with 409 while its signature is fresh."""
    source, timestamp = await run_in_threadpool(_authenticate, session, name, body, signature, settings)
    assert source.id is not None
    await run_in_threadpool(hand_back_connection, session)  # the delivery is claimed and stored on connections of its own
    engine: Engine = request.app.state.engine
    digest = delivery_digest(body, timestamp)
    if not await run_in_threadpool(_claim, engine, source.id, digest, timestamp, settings.webhook_tolerance_seconds):
        raise ProblemError(
            409,
            "Delivery already received",
            "this delivery (the same signature timestamp and body) was already accepted for this source; it is not applied twice. "
            "Send a new event with a fresh timestamp and signature.",
        )
    try:
        records = _webhook_records(body, _mapping_of(source).records)
        summary = await run_in_threadpool(_store, engine, metrics, name, records, f"webhook:{name}")
    except Exception:
        # The body was refused whole, or the server failed partway (a retry finds what was stored
        # unchanged): either way the sender may retry this very delivery.
        await run_in_threadpool(_forget, engine, source.id, digest)
        raise
    curate_if_stored(request, summary)
    return _summary_response(summary)
