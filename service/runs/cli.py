"""The registry and run commands: `model list|create|update`, `endpoint list|create|update` and
`run list|show`, on the database or, with `--url`, over the API (`service.core.remote`). Both
paths produce the API's shapes, so a table or `--json` reads the same either way."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Annotated, Any, TypeVar

import goldenset_client.models as api
import typer
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from sqlmodel import Session

from schemas.model_registry import Augmentation, EndpointCreate, EndpointUpdate, LogprobSupport, ModelCreate, ModelUpdate, TrainsOnInputs
from service.core.problems import ProblemError
from service.core.remote import remote_client
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, JsonOption, fail, open_engine, out, print_json, print_rows

model_app = typer.Typer(help="The models under evaluation: list, register, change.", no_args_is_help=True)
endpoint_app = typer.Typer(help="The endpoints that serve models, with their data-retention terms and augmentation: list, register, change.", no_args_is_help=True)
run_app = typer.Typer(help="Eval runs: list them, or show one with its score.", no_args_is_help=True)

M = TypeVar("M", bound=BaseModel)
MODEL_COLUMNS = {"name": "model", "provider": "provider", "training_cutoff": "training cutoff", "release_date": "released", "notes": "notes"}
ENDPOINT_COLUMNS = {
    "name": "endpoint",
    "model": "model",
    "base_url": "base URL",
    "trains_on_inputs": "trains on inputs",
    "terms_age_days": "terms age (days)",
    "sealed_allowed": "sealed allowed",
    "augmented": "augmented",
    "augmentations": "with",
    "logprobs": "log-probabilities",
}
RUN_COLUMNS = {
    "id": "run",
    "release": "release",
    "split": "split",
    "model": "model",
    "endpoint": "endpoint",
    "item_count": "items",
    "augmented": "augmented",
    "created_at": "started",
}


def _dump(value: BaseModel | list[Any]) -> Any:
    if isinstance(value, list):
        return [entry.model_dump(mode="json") for entry in value]
    return value.model_dump(mode="json")


def _answer(remote: Callable[[Any], Any], local: Callable[[Session], Any]) -> Any:
    """The answer as JSON-ready data: from the API when `--url` was given, else from the database
    (one unit of work, committed when the answer is made; a refused request ends the command
    with exit 2 and writes nothing)."""
    with remote_client() as client:
        if client is not None:
            return _dump(remote(client))
    from service.core.db import write_transaction

    with write_transaction(open_engine()) as session:
        try:
            return _dump(local(session))
        except ProblemError as exc:
            raise fail(exc.detail) from exc


def _body(shape: type[M], **fields: Any) -> M:
    """The request body, checked here: a bad value ends the command naming the field (exit 2)."""
    try:
        return shape.model_validate({key: value for key, value in fields.items() if value is not None})
    except PydanticValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, error['loc'])) or 'value'}: {error['msg']}" for error in exc.errors())
        raise fail(problems) from exc


@model_app.command("list")
def model_list(as_json: JsonOption = False) -> None:
    """List the registered models, with their training cutoffs."""
    from service.runs.model_registry import list_models, model_read

    rows = _answer(lambda client: client.list_models(), lambda session: [model_read(model) for model in list_models(session=session)])
    print_rows(rows, MODEL_COLUMNS, as_json=as_json)


@model_app.command("create")
def model_create(
    name: Annotated[str, typer.Argument(help="The model's name, e.g. acme-1 or acme/llama-3-8b.")],
    provider: Annotated[str | None, typer.Option(help="Who serves or trained it.")] = None,
    training_cutoff: Annotated[str | None, typer.Option("--training-cutoff", help="The date its training data ends, as its provider states it (YYYY-MM-DD).")] = None,
    release_date: Annotated[str | None, typer.Option("--release-date", help="When it was released (YYYY-MM-DD).")] = None,
    notes: Annotated[str | None, typer.Option(help="Anything worth knowing.")] = None,
) -> None:
    """Register a model (admin over the API)."""
    from service.runs.model_registry import create_model, model_read

    data = _body(ModelCreate, name=name, provider=provider, training_cutoff=_day(training_cutoff), release_date=_day(release_date), notes=notes)
    row = _answer(
        lambda client: client.create_model(api.ModelCreate.model_validate(data.model_dump(mode="json", exclude_unset=True))),
        lambda session: model_read(create_model(session=session, data=data, actor=CLI_ACTOR)),
    )
    out.print(f"model {row['name']} registered" + (f", training cutoff {row['training_cutoff']}" if row["training_cutoff"] else ""), highlight=False)


@model_app.command("update")
def model_update(
    name: Annotated[str, typer.Argument(help="The model.")],
    provider: Annotated[str | None, typer.Option(help="Who serves or trained it.")] = None,
    training_cutoff: Annotated[str | None, typer.Option("--training-cutoff", help="YYYY-MM-DD.")] = None,
    release_date: Annotated[str | None, typer.Option("--release-date", help="YYYY-MM-DD.")] = None,
    notes: Annotated[str | None, typer.Option(help="Anything worth knowing.")] = None,
) -> None:
    """Change a model's provider, training cutoff, release date or notes (admin over the API)."""
    from service.runs.model_registry import model_read, require_model, update_model

    data = _body(ModelUpdate, provider=provider, training_cutoff=_day(training_cutoff), release_date=_day(release_date), notes=notes)

    def here(session: Session) -> Any:
        return model_read(update_model(session=session, model=require_model(session=session, name=name), data=data, actor=CLI_ACTOR))

    row = _answer(lambda client: client.update_model(name, api.ModelUpdate.model_validate(data.model_dump(mode="json", exclude_unset=True))), here)
    out.print(f"model {row['name']} updated", highlight=False)


@endpoint_app.command("list")
def endpoint_list(model: Annotated[str | None, typer.Option(help="Only the endpoints of this model.")] = None, as_json: JsonOption = False) -> None:
    """List the endpoints: terms (and whether a sealed run may go there now) and augmentation."""
    from service.runs.model_registry import endpoint_read, list_endpoints

    def here(session: Session) -> Any:
        return [endpoint_read(session, endpoint, terms_max_age_days=get_settings().terms_max_age_days) for endpoint in list_endpoints(session=session, model=model)]

    rows = _answer(lambda client: client.list_endpoints(model=model), here)
    print_rows(rows, ENDPOINT_COLUMNS, as_json=as_json)


def _endpoint_options(augmented: bool | None, augmentation: list[Augmentation] | None, logprobs: LogprobSupport | None) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if logprobs is not None:
        fields["logprobs"] = logprobs
    if augmented is not None:
        fields["augmented"] = augmented
    if augmentation:
        fields["augmentations"] = [value.value for value in augmentation]
    return fields


def _endpoint_traits(row: dict[str, Any]) -> str:
    return f"trains on inputs {row['trains_on_inputs']}, augmented {str(row['augmented']).lower()}, log-probabilities {row['logprobs']}"


AugmentedOption = Annotated[
    bool | None, typer.Option("--augmented/--bare", help="Whether the model behind it has retrieval, web search or tools (probes refuse it).", show_default=False)
]
AugmentationOption = Annotated[list[Augmentation] | None, typer.Option("--augmentation", help="Which augmentation it has (repeat): retrieval, web_search, tools, other.")]
LogprobsOption = Annotated[
    LogprobSupport | None,
    typer.Option(
        "--logprobs",
        help="How it gives log-probabilities: none, completions_echo (vLLM, OpenAI legacy completions), tgi_prefill (TGI), chat (llama.cpp, chat models).",
        show_default=False,
    ),
]


@endpoint_app.command("create")
def endpoint_create(
    name: Annotated[str, typer.Argument(help="The endpoint's name, e.g. acme-1-zdr.")],
    model: Annotated[str, typer.Option(help="The registered model it serves.")],
    base_url: Annotated[str, typer.Option("--base-url", help="Its OpenAI-compatible base URL.")],
    trains_on_inputs: Annotated[
        TrainsOnInputs, typer.Option("--trains-on-inputs", help="Whether the provider may train on what is sent (per its terms).")
    ] = TrainsOnInputs.UNKNOWN,
    retention_days: Annotated[int | None, typer.Option("--retention-days", help="How long the provider keeps inputs.")] = None,
    terms_url: Annotated[str | None, typer.Option("--terms-url", help="Where the terms are.")] = None,
    augmented: AugmentedOption = None,
    augmentation: AugmentationOption = None,
    logprobs: LogprobsOption = None,
) -> None:
    """Register an endpoint of a model, with its terms (admin over the API)."""
    from service.runs.model_registry import create_endpoint, endpoint_read

    fields = {"name": name, "model": model, "base_url": base_url, "trains_on_inputs": trains_on_inputs, "retention_days": retention_days, "terms_url": terms_url}
    data = _body(EndpointCreate, **fields, **_endpoint_options(augmented, augmentation, logprobs))

    def here(session: Session) -> Any:
        return endpoint_read(session, create_endpoint(session=session, data=data, actor=CLI_ACTOR), terms_max_age_days=get_settings().terms_max_age_days)

    row = _answer(lambda client: client.create_endpoint(api.EndpointCreate.model_validate(data.model_dump(mode="json", exclude_unset=True))), here)
    out.print(f"endpoint {row['name']} registered for {row['model']}: {_endpoint_traits(row)}", highlight=False)


@endpoint_app.command("update")
def endpoint_update(
    name: Annotated[str, typer.Argument(help="The endpoint.")],
    trains_on_inputs: Annotated[TrainsOnInputs | None, typer.Option("--trains-on-inputs", help="The terms as checked now.")] = None,
    retention_days: Annotated[int | None, typer.Option("--retention-days", help="How long the provider keeps inputs.")] = None,
    terms_url: Annotated[str | None, typer.Option("--terms-url", help="Where the terms are.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Its base URL.")] = None,
    augmented: AugmentedOption = None,
    augmentation: AugmentationOption = None,
    logprobs: LogprobsOption = None,
) -> None:
    """Change an endpoint's terms, URL, augmentation or log-probabilities; changed terms count as checked now, by you (admin over the API)."""
    from service.runs.model_registry import endpoint_read, require_endpoint, update_endpoint

    fields = {"trains_on_inputs": trains_on_inputs, "retention_days": retention_days, "terms_url": terms_url, "base_url": base_url}
    data = _body(EndpointUpdate, **fields, **_endpoint_options(augmented, augmentation, logprobs))

    def here(session: Session) -> Any:
        endpoint = update_endpoint(session=session, endpoint=require_endpoint(session=session, name=name), data=data, actor=CLI_ACTOR)
        return endpoint_read(session, endpoint, terms_max_age_days=get_settings().terms_max_age_days)

    row = _answer(lambda client: client.update_endpoint(name, api.EndpointUpdate.model_validate(data.model_dump(mode="json", exclude_unset=True))), here)
    out.print(f"endpoint {row['name']} updated: {_endpoint_traits(row)}", highlight=False)


@run_app.command("list")
def run_list(
    eval_name: Annotated[str, typer.Option("--eval", help="The eval.")],
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many, newest first.")] = 100,
    as_json: JsonOption = False,
) -> None:
    """List an eval's runs, newest first."""
    from service.evals.definitions import require_eval
    from service.runs.runs import list_runs

    rows = _answer(
        lambda client: client.list_runs(eval_name, limit=limit), lambda session: list_runs(session=session, evaluation=require_eval(session=session, name=eval_name), limit=limit)
    )
    print_rows(rows, RUN_COLUMNS, as_json=as_json, caption="times are UTC")


@run_app.command("show")
def run_show(run_id: Annotated[int, typer.Argument(help="The run's id.")], as_json: JsonOption = False) -> None:
    """Show a run: what was sent where, and its mean score with a 95% interval."""
    from service.runs.runs import require_run, run_summary

    row = _answer(lambda client: client.get_run(run_id), lambda session: run_summary(session=session, run=require_run(session=session, run_id=run_id)))
    if as_json:
        print_json(row)
        return
    score = row["score"]
    interval = f"{score['mean']:.3f} [{score['low']:.3f}, {score['high']:.3f}] ({score['method']})" if score.get("mean") is not None else "no scores yet"
    out.print(f"run {row['id']}: {row['model']} through {row['endpoint']} on {row['eval']} release {row['release']} ({row['split']})", highlight=False)
    out.print(f"  {row['scored']} of {row['scored'] + row['remaining']} items scored; score {interval}", highlight=False)
    if row["augmented"]:
        out.print("  the endpoint was augmented (retrieval, web search or tools) when the run started", highlight=False)


def _day(text: str | None) -> date | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise fail(f"{text!r} is not a date: give YYYY-MM-DD") from exc


def register(app: typer.Typer) -> None:
    """Add `model`, `endpoint` and `run` to the `goldenset` app."""
    app.add_typer(model_app, name="model")
    app.add_typer(endpoint_app, name="endpoint")
    app.add_typer(run_app, name="run")
