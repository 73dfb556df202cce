"""`/ui/upload`: a file of incidents ingested from the browser (ingest scope; a new source needs
admin), with a mapping typed or chosen, and what was rejected shown by reason.

The file goes the way `goldenset ingest FILE --source NAME` takes it: the source is found or
created (kind `file`) and the mapping stored on it in one unit of work (`file_source`), the
records are read in the mapping's or the file's format, and stored chunk by chunk in units of
work of their own (`ingest_records`, audited `items.ingest` with the person), so a refused record
costs only itself and nothing is half-written. A mapping or a document that cannot be read at all
is refused before anything is stored. Curation runs after, in the background, never in the
request. Files larger than `GOLDENSET_MAX_BODY_BYTES` are refused before they are read.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import yaml
from fastapi import File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from ingest.mapping import MappingError, parse_mapping
from ingest.readers import FORMATS, DocumentError, detect_format, iter_records
from schemas.problem import IngestSummary
from schemas.source import SourceKind, check_source_name
from schemas.token import Scope
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.sources.definitions import PLAIN_KINDS, SourceKindClash, file_source, get_source, list_sources, source_mapping
from service.sources.ingestion import ingest_records
from service.ui.pages import need, page, secret_key, ui_router
from service.ui.refusals import Refusal, shows_refusal

router = ui_router()

EXAMPLES_SHOWN = 20
"""Rejected records listed by name on the result page (every reason is counted)."""


def _form_page(request: Request, typed: dict[str, str], errors: dict[str, str], status: int = 200, result: dict[str, Any] | None = None) -> HTMLResponse:
    with Session(request.app.state.engine) as session:
        sources = [source.name for source in list_sources(session=session) if source.kind in PLAIN_KINDS]
    context = {"typed": typed, "errors": errors, "sources": sources, "formats": sorted(FORMATS), "result": result}
    return page(request, "upload.html", context, status=status)


def mapping_from_text(text: str) -> dict[str, Any] | None:
    """A mapping typed as YAML or JSON, checked as `goldenset ingest --mapping` checks a file's
    (None when blank). Raises MappingError naming the bad field."""
    if not text.strip():
        return None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MappingError(f"the mapping is not YAML or JSON: {exc}") from exc
    return parse_mapping(document, origin="the mapping typed").model_dump(mode="json", exclude_defaults=True)


def result_of(summary: IngestSummary) -> dict[str, Any]:
    """What the result page shows of an ingest: its counts, rejections by reason with their count
    (most first) and the first rejected records with where they were and why."""
    reasons = Counter(summary.rejected_by_reason)
    return {
        "source": summary.source,
        "counts": summary.counts(),
        "reasons": reasons.most_common(),
        "examples": summary.errors[:EXAMPLES_SHOWN],
        "more": max(0, len(summary.errors) - EXAMPLES_SHOWN),
        "redacted": sorted(summary.redacted.items()),
    }


@router.get("/ui/upload")
def upload_form(request: Request) -> HTMLResponse:
    need(request, Scope.INGEST, "Uploading incidents")
    return _form_page(request, {"source": "", "new_source": "", "mapping": "", "format": ""}, {})


@router.post("/ui/upload", response_model=None)
def upload(
    request: Request,
    file: Annotated[UploadFile, File()],
    source: Annotated[str, Form(max_length=64)] = "",
    new_source: Annotated[str, Form(max_length=64)] = "",
    mapping: Annotated[str, Form(max_length=200_000)] = "",
    format: Annotated[str, Form(max_length=16)] = "",
) -> HTMLResponse:
    """Ingest the file; the answer is the form again with the run's result (or with why nothing was stored)."""
    who = need(request, Scope.INGEST, "Uploading incidents")
    typed = {"source": source, "new_source": new_source, "mapping": mapping, "format": format}
    shows_refusal(request, lambda refusal: _refused(request, typed, refusal))
    name = new_source.strip() or source.strip()
    if not name:
        raise ProblemError(422, "Nothing ingested", "choose a source, or name a new one")
    engine = request.app.state.engine
    try:
        check_source_name(name)
        typed_mapping = mapping_from_text(mapping)
    except (ValueError, MappingError) as exc:
        raise ProblemError(422, "Nothing ingested", str(exc)) from exc
    with Session(engine) as session:
        exists = get_source(session=session, name=name) is not None
    if not exists:
        need(request, Scope.ADMIN, f"Adding the source {name!r}")
    data = file.file.read()
    if not data:
        raise ProblemError(422, "Nothing ingested", "the file is empty: choose a file of incidents (JSON Lines, JSON or CSV)")
    with write_transaction(engine) as session:
        try:
            stored, _ = file_source(session=session, name=name, kind=SourceKind.FILE.value, mapping=typed_mapping, secret_key=secret_key(request), actor=who.actor)
        except (SourceKindClash, MappingError) as exc:
            raise ProblemError(422, "Nothing ingested", str(exc)) from exc
        if stored.kind not in PLAIN_KINDS:
            raise ProblemError(409, "Nothing ingested", f"source {name!r} is a {stored.kind} connector: its records come from its pulls, not from files")
    effective = source_mapping(stored)
    try:
        records = list(iter_records(data, detect_format(Path(Path(file.filename or "upload").name), format or None, effective.format), effective.records))
    except (DocumentError, ValueError) as exc:
        raise ProblemError(422, "Nothing ingested", f"{file.filename}: {exc}; nothing was ingested") from exc
    summary = ingest_records(units=partial(write_transaction, engine), source=stored, records=records, mapping=effective, actor=who.actor)
    if summary.new or summary.updated:
        request.app.state.curation_trigger.request()
    blank = {"source": name, "new_source": "", "mapping": "", "format": ""}
    return _form_page(request, blank, {}, result=result_of(summary))


def _refused(request: Request, typed: dict[str, str], refusal: Refusal) -> HTMLResponse:
    return _form_page(request, typed, {"form": refusal.detail}, status=refusal.status)
