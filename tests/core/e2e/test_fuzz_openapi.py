"""The API against its own OpenAPI document, on SQLite and PostgreSQL: schemathesis generates valid
and invalid requests for every operation (a bounded number each), sends them over a real socket to
a server whose database holds a released eval, a registry, a run with results and a push source,
and runs every one of its checks on each answer: no server error, only documented statuses,
content types and headers, answers matching their schemas, invalid input refused, valid input not
refused for its shape, `Allow` on 405, authentication never ignored.

Every rule a schema can state is in the document (enums, bounds, lengths, patterns, date ranges,
exclusive members), so schema-valid input is refused with 422 only for a condition no schema can
state, named by the problem's `reason` (or each of its `errors`' reasons). Any other 422 to valid
input fails the test, with the operation, the field and the reason. The conditions:

- `unknown_source`, `reference_source`, `source_not_in_eval`, `not_a_corpus`, `not_in_run`,
  `unknown_item`: a named source, corpus or item must exist (or belong to the eval or run): that
  depends on the database, not on the request's shape.
- `endpoint_model_mismatch`: the endpoint named must serve the model named; a relation between
  two stored rows.
- `no_cutoff`, `too_few_items`: the model must have a training cutoff registered, and enough items
  must lie on each side of it; stored facts.
- `future_period`: a refresh `at` a period after the current one needs `allow_future`; a window
  relative to now.
- `invalid_cursor`: a cursor must be one the API returned (it is encrypted).
- `invalid_schedule`: a schedule must be a crontab expression; a grammar, not a pattern.
- `invalid_mapping`, `invalid_connector`: a source's mapping and connector configuration are
  free-form objects judged by the connector they name (third-party connectors add their own).
- `conflicting_filters`, `eval_or_corpus`: query parameters that exclude each other (or need one
  of two); OpenAPI states each parameter alone.
- `not_on_scale`, `two_evals`, `sealed_run`: the runs of a score change must be of one eval, dev
  runs, and held by its stored scale fit; stored facts.
- `invalid_team`: an eval's team settings must be able to settle an item (round-robin needs as
  many named reviewers as votes, team review needs manual approval); a relation between fields.
- `same_item`, `no_change`, `repeated_items`, `duplicate`, `conflict`, `idempotency_conflict`:
  a path id against a body id, a change against the stored item, entries of a list against each
  other (objects that differ only in their score), a key against the run it started.
- `nul_character`: a NUL character anywhere in a text, a key or a free-form value; JSON carries
  it, no database text column stores it, and a schema could state it only with a pattern on every
  string and every key of every free-form object."""

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

from schemas.runs import ResultIn, ResultsPost, RunCreate
from service.app import create_app
from service.core.db import make_engine, write_transaction
from service.core.tokens import create_token
from service.runs.runs import post_results, require_run, start_run
from tests.conftest import BACKENDS, LiveServer, make_settings, new_database, serve
from tests.eval_support import HashingEncoder
from tests.run_support import auth, register, released_eval

EXAMPLES = int(os.environ.get("GOLDENSET_FUZZ_EXAMPLES", "15"))
"""Examples per operation and generation mode; raise it for a longer hunt."""
POSITIVE_STATUSES = ["2xx", "401", "403", "404", "409", "422"]
NEGATIVE_STATUSES = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
"""Schemathesis's defaults for invalid input, and 413: a string past its `maxLength` may also make
the body larger than the limit, which is refused before it is read."""
SCHEMA_FREE_REASONS = frozenset(
    {
        "unknown_source", "reference_source", "source_not_in_eval", "not_a_corpus", "not_in_run", "unknown_item",
        "endpoint_model_mismatch", "no_cutoff", "too_few_items", "future_period", "invalid_cursor", "invalid_schedule",
        "invalid_mapping", "invalid_connector", "conflicting_filters", "eval_or_corpus", "not_on_scale", "two_evals", "sealed_run", "invalid_team",
        "same_item", "no_change", "repeated_items", "duplicate", "conflict", "idempotency_conflict", "nul_character", "test_not_available",
    }
)  # fmt: skip
"""The conditions for which schema-valid input may be refused with 422 (see the module's docstring)."""


def _reasons(problem: dict[str, Any]) -> list[str]:
    """The reasons a 422 problem gives: its own, else each error's. The guard refuses a NUL
    character before validation, naming it in the error's detail."""
    if "reason" in problem:
        return [str(problem["reason"])]
    errors = problem.get("errors", [])
    return ["nul_character" if str(error.get("detail", "")).startswith("contains a NUL character") else str(error.get("reason")) for error in errors]


def _config(token: str) -> SchemathesisConfig:
    """All checks, the bearer token given as the document's `bearer` scheme (so a case that drops
    or spoils it is judged as an unauthenticated one), 422 allowed for valid-looking input here
    (`_unstated_refusal` then judges each such answer by its reasons) and 413 for invalid input."""
    return SchemathesisConfig.from_dict(
        {
            "auth": {"openapi": {"bearer": {"bearer": token}}},
            "checks": {"positive_data_acceptance": {"expected-statuses": POSITIVE_STATUSES}, "negative_data_rejection": {"expected-statuses": NEGATIVE_STATUSES}},
        }
    )


def _seed(engine: Engine) -> str:
    """A released eval, a model with endpoints, a dev run with results; returns an all-scopes token."""
    released_eval(engine, count=30)
    register(engine)
    started = start_run(engine=engine, eval_name="ops", data=RunCreate(model="m1", endpoint="m1-no"), actor="token:fuzz", scopes=frozenset({"read"}), terms_max_age_days=90)
    with write_transaction(engine) as session:
        run = require_run(session=session, run_id=started.id)
        post_results(session=session, run=run, data=ResultsPost(results=[ResultIn(item_id=item.item_id, score=0.5) for item in started.items[:5]]), actor="token:fuzz")
    with write_transaction(engine) as session:
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


def _unstated_refusal(response: Any) -> str | None:
    """Why a 422 answer to schema-valid input is one the schema should have stated, or None when
    the problem names only conditions a schema cannot state (`SCHEMA_FREE_REASONS`)."""
    try:
        problem = response.json()
    except ValueError:
        return "the 422 answer is not a problem document"
    reasons = _reasons(problem)
    unstated = [reason for reason in reasons if reason not in SCHEMA_FREE_REASONS] or ([] if reasons else ["(no reason)"])
    if not unstated:
        return None
    locations = ", ".join(str(error.get("location")) for error in problem.get("errors", []))
    return f"{', '.join(unstated)} at {locations or '-'}: {problem.get('detail')}"


def _hunt(operation: APIOperation[Any, Any, Any, Any], mode: GenerationMode, base_url: str, unstated: dict[str, str]) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate], derandomize=True)
    @given(case=operation.as_strategy(generation_mode=mode))
    def call(case: schemathesis.Case[Any]) -> None:
        response = case.call_and_validate(base_url=base_url, timeout=30)
        positive = case.meta is not None and case.meta.generation.mode.is_positive
        if positive and response.status_code == 422 and (why := _unstated_refusal(response)) is not None:
            unstated.setdefault(f"{operation.label}: {why}", f"query={case.query!r} body={case.body!r}"[:600])

    call()


def test_every_operation_answers_as_its_document_says(fuzzed: tuple[LiveServer, str]) -> None:
    server, token = fuzzed
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=_config(token), headers=auth(token))
    failures: list[str] = []
    unstated: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]
    assert len(operations) > 40
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _hunt(operation, mode, server.url, unstated)
            except Unsatisfiable:
                continue  # nothing invalid to send (an operation without parameters or body)
            except (Exception, BaseExceptionGroup) as exc:  # every operation is hunted; all failures are reported together
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    failures.extend(f"{refusal}\n    e.g. {example}" for refusal, example in sorted(unstated.items()))
    assert not failures, "\n\n".join(failures)
