"""`/ui/sources`: sources from the browser. The list (every source with its state, items and last
pull; read), a new source (`/ui/sources/new`; admin), a source's settings (`/ui/sources/{name}`;
admin) and "Pull now" (ingest).

A new source's form is that of its kind: `?kind=` picks a connector, whose settings are its
configuration model's fields (`service.ui.connector_forms`); secrets are write-only (never shown;
blank keeps the stored one). Creating and changing go through `create_source` and
`update_source`, as `POST` and `PATCH /v1/sources` do, so a page refuses what the API refuses,
naming the setting, and the form comes back as typed. A new source's webhook secret is shown once,
on the answer to its form. "Pull now" starts the pull in the background, as the API's 202 does;
the list shows its state. "Test connection" (admin, on a connector source's settings page) reads
one page from the vendor as `POST /v1/sources/{name}/test` does, storing nothing but its audit
event, and shows the result on that page: a success and a failure (with what to change) look apart.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError
from sqlmodel import Session

from ingest.connectors.base import ConfigError, ConnectorConfig
from ingest.connectors.registry import UnknownConnector, connector_class, connector_kinds
from ingest.mapping import MappingError
from schemas.source import ConnectionTestResult, SourceCreate, SourceUpdate
from schemas.token import Scope
from service.core.deps import WriteSessionDep, hand_back_connection
from service.core.problems import ProblemError
from service.sources.connection_test import run_connection_test
from service.sources.definitions import PLAIN_KINDS, connector_config, create_source, list_sources, read_source, require_source, update_source
from service.sources.requested_pulls import start_pull
from service.ui.connector_forms import config_document, config_fields, form_values
from service.ui.pages import done, field_errors, need, page, secret_key, ui_router
from service.ui.refusals import Refusal, shows_refusal

router = ui_router()

PLAIN_KIND_HELP = {
    "push": "records are sent to it: POST /v1/sources/{name}/items, a signed webhook, or goldenset ingest",
    "file": "records come from files uploaded or ingested with goldenset ingest",
}
"""What the kinds without a connector are for, as the new-source form says it."""


def _kinds() -> list[str]:
    return sorted(PLAIN_KINDS) + connector_kinds()


def _model(kind: str) -> type[ConnectorConfig] | None:
    return None if kind in PLAIN_KINDS else connector_class(kind).config_model


def _typed_config(form: Any, kind: str) -> dict[str, str]:
    model = _model(kind)
    if model is None:
        return {}
    return {field.name: str(form.get(f"config.{field.name}", "")) for field in config_fields(model)}


@router.get("/ui/sources")
def sources(request: Request) -> HTMLResponse:
    need(request, Scope.READ, "Reading the sources")
    with Session(request.app.state.engine) as session:
        return page(request, "sources.html", {"sources": list_sources(session=session), "plain": PLAIN_KINDS})


def _new_page(request: Request, kind: str, typed: dict[str, Any], errors: dict[str, str], status: int = 200, created: dict[str, str] | None = None) -> HTMLResponse:
    if kind not in _kinds():
        kind = "push"
    model = _model(kind)
    context = {
        "kinds": _kinds(),
        "kind": kind,
        "fields": config_fields(model) if model else [],
        "help": PLAIN_KIND_HELP.get(kind, ""),
        "typed": typed,
        "errors": errors,
        "created": created,
    }
    return page(request, "source_new.html", context, status=status)


@router.get("/ui/sources/new")
def new_source_form(request: Request, kind: Annotated[str, Query(max_length=64)] = "push") -> HTMLResponse:
    need(request, Scope.ADMIN, "Adding a source")
    return _new_page(request, kind, {"name": "", "pull_interval_seconds": "", "config": {}}, {})


async def submitted(request: Request) -> dict[str, str]:
    """The submitted form's fields as text (forms whose fields depend on a choice, such as the
    connector's settings); files are left out."""
    form = await request.form()
    return {key: value for key, value in form.items() if isinstance(value, str)}


FormDep = Annotated[dict[str, str], Depends(submitted)]


@router.post("/ui/sources/new", response_model=None)
def create(request: Request, session: WriteSessionDep, form: FormDep) -> HTMLResponse:
    """Create the source in the request's unit of work; the answer shows its webhook secret once."""
    who = need(request, Scope.ADMIN, "Adding a source")
    kind = form.get("kind", "")
    if kind not in _kinds():
        raise ProblemError(422, "Source not added", f"unknown kind {kind!r}; choose one of {', '.join(_kinds())}")
    config_typed = _typed_config(form, kind)
    typed: dict[str, Any] = {"name": form.get("name", "").strip(), "pull_interval_seconds": form.get("pull_interval_seconds", "").strip(), "config": config_typed}
    shows_refusal(request, lambda refusal: _new_page(request, kind, typed, {"form": refusal.detail}, status=refusal.status))
    model = _model(kind)
    values: dict[str, Any] = {"name": typed["name"], "kind": kind}
    if model is not None:
        values["connector"] = config_document(model, config_typed, None)
    if typed["pull_interval_seconds"]:
        values["pull_interval_seconds"] = typed["pull_interval_seconds"]
    try:
        data = SourceCreate.model_validate(values)
        _, secret = create_source(session=session, data=data, secret_key=secret_key(request), actor=who.actor)
    except ValidationError as exc:
        raise ProblemError(422, "Source not added", "; ".join(f"{field}: {message}" for field, message in field_errors(exc).items())) from exc
    except FileExistsError as exc:
        raise ProblemError(409, "Source not added", str(exc)) from exc
    except (MappingError, ConfigError, UnknownConnector) as exc:
        raise ProblemError(422, "Source not added", str(exc)) from exc
    fresh = {"name": "", "pull_interval_seconds": "", "config": {}}
    return _new_page(request, kind, fresh, {}, status=201, created={"name": data.name, "secret": secret})


def _settings_page(request: Request, session: Session, name: str, typed: dict[str, Any] | None, errors: dict[str, str], status: int = 200) -> HTMLResponse:
    source = require_source(session=session, name=name)
    model = _model(source.kind)
    stored = connector_config(source, secret_key=secret_key(request)) if model is not None and source.connector_secret else None
    shown = typed or {
        "config": form_values(stored),
        "pull_interval_seconds": "" if source.pull_interval_seconds is None else str(source.pull_interval_seconds),
        "enabled": source.enabled,
    }
    context = {
        "source": read_source(session=session, source=source),
        "connector": model is not None,
        "fields": config_fields(model) if model else [],
        "typed": shown,
        "errors": errors,
    }
    return page(request, "source_settings.html", context, status=status)


@router.get("/ui/sources/{name}")
def source_settings(request: Request, name: str) -> HTMLResponse:
    need(request, Scope.ADMIN, "Changing a source's settings")
    with Session(request.app.state.engine) as session:
        return _settings_page(request, session, name, None, {})


@router.post("/ui/sources/{name}", response_model=None)
def change_settings(request: Request, name: str, session: WriteSessionDep, form: FormDep) -> RedirectResponse:
    """Change the source's settings (as `PATCH /v1/sources/{name}`): the connector's settings
    (blank secrets kept), the pull interval, enabled, and a cursor reset when ticked."""
    who = need(request, Scope.ADMIN, "Changing a source's settings")
    source = require_source(session=session, name=name)
    engine = request.app.state.engine
    config_typed = _typed_config(form, source.kind)
    typed: dict[str, Any] = {"config": config_typed, "pull_interval_seconds": form.get("pull_interval_seconds", "").strip(), "enabled": form.get("enabled") == "yes"}

    def form_again(refusal: Refusal) -> HTMLResponse:
        with Session(engine) as fresh:
            return _settings_page(request, fresh, name, typed, {"form": refusal.detail}, status=refusal.status)

    shows_refusal(request, form_again)
    model = _model(source.kind)
    values: dict[str, Any] = {"enabled": typed["enabled"], "pull_interval_seconds": typed["pull_interval_seconds"] or None, "reset_cursor": form.get("reset_cursor") == "yes"}
    if model is not None:
        stored = connector_config(source, secret_key=secret_key(request)) if source.connector_secret else None
        values["connector"] = config_document(model, config_typed, stored)
    try:
        update = SourceUpdate.model_validate(values)
        update_source(session=session, source=source, data=update, secret_key=secret_key(request), actor=who.actor)
    except ValidationError as exc:
        raise ProblemError(422, "Settings not saved", "; ".join(f"{field}: {message}" for field, message in field_errors(exc).items())) from exc
    except (MappingError, ConfigError) as exc:
        raise ProblemError(422, "Settings not saved", str(exc)) from exc
    return done("/ui/sources", f"Saved the settings of source {name}.")


@router.post("/ui/sources/{name}/pull")
def pull_now(request: Request, name: str, session: WriteSessionDep) -> RedirectResponse:
    """Start a pull of a connector source in the background (ingest scope)."""
    who = need(request, Scope.INGEST, "Pulling a source")
    source = require_source(session=session, name=name)
    if source.kind in PLAIN_KINDS:
        raise ProblemError(409, "Not pulled", f"source {name!r} is a {source.kind} source; only connector sources are pulled")
    hand_back_connection(session)  # the pull reads and writes on connections of its own
    start_pull(request, name, who.actor)
    return done("/ui/sources", f"Pull of {name} started; this page shows its state (reload to follow it).")


@router.post("/ui/sources/{name}/test")
def connection_test(request: Request, name: str) -> RedirectResponse:
    """Test the connector source's connection (admin scope, as the API's `POST /v1/sources/{name}/test`)
    and show the result on its settings page. The test opens its own connections: the request holds none."""
    who = need(request, Scope.ADMIN, "Testing a source's connection")
    result = run_connection_test(engine=request.app.state.engine, name=name, secret_key=secret_key(request), actor=who.actor)
    return done(f"/ui/sources/{name}", connection_notice(result), tone="ok" if result.ok else "error")


def connection_notice(result: ConnectionTestResult) -> str:
    """A connection test's result as the settings page shows it: what happened and, on a failure, what to do first."""
    if result.ok:
        return f"Connection OK: {result.detail}."
    status = f", HTTP {result.http_status}" if result.http_status is not None else ""
    return f"Connection test failed ({result.outcome.value}{status}): {result.action or ''} Answer: {result.detail}"
