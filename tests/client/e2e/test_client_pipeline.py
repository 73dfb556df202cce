"""The eval pipeline over `goldenset_client.Client` against a real server: a run started, its items
paged through, scores posted and read back, exposure reports, a gate's refusal as `Forbidden`; and
the example pipeline (`examples/eval_pipeline.py`, which needs only the client distribution) run
end to end. Retries and typed errors over a mock transport are in `tests/client/unit/test_retries.py`."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest
from goldenset_client import Client, Forbidden, ResultIn
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.runs import Result
from tests.conftest import REPO_ROOT, LiveServer
from tests.run_support import register, released_eval


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
        assert [evaluation.name for evaluation in client.list_evals()] == ["ops"]
        assert client.list_releases("ops")[0].dev_count == len(released.dev)
        assert {endpoint.name: endpoint.sealed_allowed for endpoint in client.list_endpoints(model="m1")} == {"m1-no": True, "m1-unknown": False, "m1-yes": False}
        run = client.start_run("ops", model="m1", endpoint="m1-no")
        items = list(client.iter_run_items(run.id, page_size=7))
        assert [item.item_id for item in items] == [item.item_id for item in run.items] and len(items) == len(released.dev)
        accepted = client.post_results(run.id, [ResultIn(item_id=item.item_id, score=float(n % 2)) for n, item in enumerate(items)], batch=10)
        assert (accepted.scored, accepted.remaining) == (len(items), 0)
        summary = client.get_run(run.id)
        assert summary.score.method == "wilson" and summary.score.n == len(items)
        assert [exposure.endpoint for exposure in client.item_exposures(items[0].item_id).exposures] == ["m1-no"]
        assert client.eval_exposure("ops").releases[0].endpoints[0].items == len(items)
        with pytest.raises(Forbidden) as caught:
            client.start_run("ops", model="m1", endpoint="m1-unknown", split="sealed")
        assert caught.value.condition == "sealed_scope"


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
