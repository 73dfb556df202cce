"""The API against its own OpenAPI document, on SQLite and PostgreSQL: schemathesis generates valid
and invalid requests for every operation (a bounded number each), sends them over a real socket to
a server whose database holds a released eval, a registry, a run with results and a push source,
and runs every one of its checks on each answer: no server error, only documented statuses,
content types and headers, answers matching their schemas, invalid input refused, valid input not
refused for its shape, `Allow` on 405, authentication never ignored.

Valid input may still be refused with 422 for what a schema cannot say (a source that must exist,
an endpoint that must serve the model): that status is added to those positive data may get."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.config import SchemathesisConfig
from schemathesis.core.result import Ok
from schemathesis.generation import GenerationMode
from schemathesis.schemas import APIOperation
from sqlalchemy.engine import Engine
from sqlmodel import Session

from schemas.runs import ResultIn, ResultsPost, RunCreate
from service.app import create_app
from service.core.db import make_engine, write_session
from service.core.tokens import create_token
from service.runs.runs import post_results, require_run, start_run
from tests.conftest import BACKENDS, LiveServer, make_settings, new_database, serve
from tests.eval_support import HashingEncoder
from tests.run_support import auth, register, released_eval

EXAMPLES = int(os.environ.get("GOLDENSET_FUZZ_EXAMPLES", "15"))
"""Examples per operation and generation mode; raise it for a longer hunt."""
POSITIVE_STATUSES = ["2xx", "401", "403", "404", "409", "422"]


def _config(token: str) -> SchemathesisConfig:
    """All checks, the bearer token given as the document's `bearer` scheme (so a case that drops
    or spoils it is judged as an unauthenticated one), and 422 allowed for valid-looking input."""
    return SchemathesisConfig.from_dict(
        {"auth": {"openapi": {"bearer": {"bearer": token}}}, "checks": {"positive_data_acceptance": {"expected-statuses": POSITIVE_STATUSES}}}
    )


def _seed(engine: Engine) -> str:
    """A released eval, a model with endpoints, a dev run with results; returns an all-scopes token."""
    released_eval(engine, count=30)
    register(engine)
    started = start_run(engine=engine, eval_name="ops", data=RunCreate(model="m1", endpoint="m1-no"), actor="token:fuzz", scopes=frozenset({"read"}), terms_max_age_days=90)
    with write_session(engine) as session:
        run = require_run(session=session, run_id=started.id)
        post_results(session=session, run=run, data=ResultsPost(results=[ResultIn(item_id=item.item_id, score=0.5) for item in started.items[:5]]), actor="token:fuzz")
    with Session(engine) as session:
        plaintext, _ = create_token(session=session, name="fuzz", scopes=["admin", "sealed"])
    return plaintext


@pytest.fixture(params=BACKENDS)
def fuzzed(request: pytest.FixtureRequest, _templates: dict[str, str], tmp_path: Path) -> Iterator[tuple[LiveServer, str]]:
    with new_database(request.param, _templates, tmp_path) as url:
        engine = make_engine(url)
        fuzz_settings = make_settings(url)
        app: FastAPI = create_app(fuzz_settings, engine=engine, encoder=HashingEncoder())
        token = _seed(engine)
        with serve(app, engine, fuzz_settings) as server:
            yield server, token
        engine.dispose()


def _hunt(operation: APIOperation[Any, Any, Any, Any], mode: GenerationMode, base_url: str) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate], derandomize=True)
    @given(case=operation.as_strategy(generation_mode=mode))
    def call(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(base_url=base_url, timeout=30)

    call()


def test_every_operation_answers_as_its_document_says(fuzzed: tuple[LiveServer, str]) -> None:
    server, token = fuzzed
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=_config(token), headers=auth(token))
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]
    assert len(operations) > 40
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _hunt(operation, mode, server.url)
            except Unsatisfiable:
                continue  # nothing invalid to send (an operation without parameters or body)
            except (Exception, BaseExceptionGroup) as exc:  # every operation is hunted; all failures are reported together
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)
