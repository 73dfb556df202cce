"""`service.client.Client`: retries (on 429, 5xx and connection errors, honouring Retry-After, with
one Idempotency-Key per run start), problems raised as GoldensetError, typed results; and the
example eval pipeline run end to end against a real server."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from types import ModuleType

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.runs import Result, ResultIn
from service.client import Client, GoldensetError
from tests.conftest import REPO_ROOT, LiveServer
from tests.run_support import register, released_eval

RUN = {
    "id": 7, "eval": "ops", "release": 1, "split": "dev", "model": "m", "endpoint": "e", "training_cutoff": None, "trains_on_inputs": "no", "terms_checked_at": None,
    "exposes_items": False, "occurred_after": None, "item_count": 0, "actor": "token:t", "created_at": "2024-06-01T00:00:00Z", "canary": "c", "warning": None, "items": [],
}  # fmt: skip


def _client(handler: Callable[[httpx.Request], httpx.Response], retries: int = 4) -> Client:
    return Client("http://goldenset.test", token="t", retries=retries, backoff=0.001, max_backoff=0.01, transport=httpx.MockTransport(handler))


def test_requests_are_retried_on_overload_server_errors_and_lost_connections() -> None:
    seen: list[httpx.Request] = []
    answers = [httpx.Response(503), httpx.Response(429, headers={"Retry-After": "0"}), "drop", httpx.Response(201, json=RUN)]

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers[len(seen) - 1]
        if answer == "drop":
            raise httpx.ConnectError("connection reset", request=request)
        assert isinstance(answer, httpx.Response)
        return answer

    run = _client(handler).start_run("ops", model="m", endpoint="e")
    assert run.id == 7 and len(seen) == 4
    keys = {request.headers["Idempotency-Key"] for request in seen}
    assert len(keys) == 1 and all(request.headers["Authorization"] == "Bearer t" for request in seen)
    assert json.loads(seen[0].content) == {"model": "m", "endpoint": "e", "release": "latest", "split": "dev", "occurred_after": None}


def test_problems_are_raised_at_once_and_retries_end() -> None:
    calls: list[int] = []

    def refused(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(403, json={"title": "Sealed run refused", "status": 403, "detail": "terms unknown", "condition": "terms_unknown"})

    with pytest.raises(GoldensetError) as caught:
        _client(refused).start_run("ops", model="m", endpoint="e", split="sealed")
    assert (caught.value.status, caught.value.problem["condition"], len(calls)) == (403, "terms_unknown", 1)

    def down(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(502, text="bad gateway")

    calls.clear()
    with pytest.raises(GoldensetError) as caught:
        _client(down, retries=3).run(1)
    assert caught.value.status == 502 and len(calls) == 3
    with pytest.raises(ValueError, match="token"):
        Client("http://x", token="")


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eval_pipeline", REPO_ROOT / "examples" / "eval_pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_client_against_a_live_server(live_server: LiveServer, engine: Engine) -> None:
    released = released_eval(engine)
    register(engine)
    with Client(live_server.url, token=live_server.token("read", name="pipeline")) as client:
        assert [evaluation.name for evaluation in client.evals()] == ["ops"]
        assert client.releases("ops")[0].dev_count == len(released.dev)
        assert {endpoint.name: endpoint.sealed_allowed for endpoint in client.endpoints(model="m1")} == {"m1-no": True, "m1-unknown": False, "m1-yes": False}
        run = client.start_run("ops", model="m1", endpoint="m1-no")
        items = list(client.iter_run_items(run.id, page_size=7))
        assert [item.item_id for item in items] == [item.item_id for item in run.items] and len(items) == len(released.dev)
        accepted = client.post_results(run.id, [ResultIn(item_id=item.item_id, score=float(n % 2)) for n, item in enumerate(items)], batch=10)
        assert (accepted.scored, accepted.remaining) == (len(items), 0)
        summary = client.run(run.id)
        assert summary.score.method == "wilson" and summary.score.n == len(items)
        assert [exposure.endpoint for exposure in client.item_exposures(items[0].item_id).exposures] == ["m1-no"]
        assert client.eval_exposure("ops").releases[0].endpoints[0].items == len(items)
        with pytest.raises(GoldensetError) as caught:
            client.start_run("ops", model="m1", endpoint="m1-unknown", split="sealed")
        assert caught.value.problem["condition"] == "sealed_scope"


def test_the_example_pipeline_runs_end_to_end(live_server: LiveServer, engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    released = released_eval(engine)
    example = _example()
    admin = live_server.token("admin", name="setup")
    assert example.main(["--url", live_server.url, "--token", admin, "--eval", "ops", "--setup"]) == 0
    printed = capsys.readouterr().out
    assert f"{len(released.dev)} dev items of ops release 1" in printed and "bootstrap, n=" in printed
    # Afterwards a read token is enough.
    assert example.main(["--url", live_server.url, "--token", live_server.token("read", name="nightly"), "--eval", "ops"]) == 0
    with Session(engine) as session:
        assert len(session.exec(select(Result)).all()) == 2 * len(released.dev)
    assert example.main(["--url", live_server.url, "--token", "wrong", "--eval", "ops"]) == 1
    assert example.score("The quick fox", "quick brown fox") == pytest.approx(2 / 3)
