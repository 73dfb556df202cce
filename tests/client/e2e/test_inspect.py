"""`goldenset_client.inspect` end to end against a live server, offline: an Inspect eval of a
goldenset run with `mockllm/model` (outputs carry their usage, so no tokenizer is fetched), its
scores posted to the run by the hook, the run in the exposure ledger; and the dataset loader."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from goldenset_client import Client
from goldenset_client.inspect import RUN_ID, goldenset_dataset, goldenset_task, pending_results, post_pending_results, results_from_log
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog
from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Scorer, Target, includes, scorer, value_to_float
from inspect_ai.solver import TaskState
from sqlalchemy.engine import Engine

from schemas.model_registry import TrainsOnInputs
from service.evals.scale import refit_stale
from tests.conftest import LiveServer
from tests.evidence_support import register_model
from tests.run_support import Released, released_eval

CUTOFF = date(2024, 3, 1)

pytestmark = [pytest.mark.usefixtures("logging_restored"), pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")]


@pytest.fixture(autouse=True)
def _quiet_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inspect's traces, caches and logs under tmp_path, never the home folder; nothing fetched."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def ops(live_server: LiveServer, engine: Engine) -> Iterator[tuple[Client, Released]]:
    """A release of 24 KEV items, all dev; model m1 (cutoff 2024-03-01) behind an endpoint that does not train on inputs."""
    released = released_eval(engine, count=24, sealed_fraction=0.0)
    register_model(engine, "m1", cutoff=CUTOFF, endpoints={"m1-no": TrainsOnInputs.NO})
    register_model(engine, "m0", cutoff=None)
    with Client(live_server.url, token=live_server.token("read", name="inspect")) as client:
        yield client, released


def _text(messages: list[ChatMessage]) -> str:
    return messages[-1].text


def _mock(answers: dict[str, str]) -> Any:
    """`mockllm/model` answering each prompt from `answers` (else "no idea"), with usage set."""

    def outputs(messages: list[ChatMessage], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        output = ModelOutput.from_content(model="mockllm", content=answers.get(_text(messages), "no idea"))
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    return get_model("mockllm/model", custom_outputs=outputs)


def _run(task: Any, answers: dict[str, str], log_dir: Path) -> EvalLog:
    [log] = inspect_eval(task, model=_mock(answers), log_dir=str(log_dir), display="none")
    return log


def _answers(client: Client, every: int) -> dict[str, str]:
    """The right answer to every `every`-th dev item (by id), so the scores are a mix of 1 and 0."""
    items = sorted(client.release_items("ops").items, key=lambda item: item.item_id)
    return {str(item.content["input"]): str(item.content["reference"]) for n, item in enumerate(items) if n % every == 0}


def test_an_inspect_eval_of_a_run_posts_its_scores_and_is_in_the_ledger(ops: tuple[Client, Released], engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    client, released = ops
    task = goldenset_task(client, "ops", model="m1", endpoint="m1-no", scorer=includes())
    run_id = task.metadata[RUN_ID] if task.metadata else None
    assert isinstance(run_id, int)
    with caplog.at_level(logging.INFO, logger="goldenset_client.inspect"):
        log = _run(task, _answers(client, every=3), tmp_path / "logs")
    # After posting, the hook says what the run scored and that the common scale has not taken it in yet.
    said = [record.getMessage() for record in caplog.records if record.name == "goldenset_client.inspect"]
    assert any(line.startswith(f"goldenset run {run_id}: mean score ") for line in said), said
    assert f"run {run_id}: not on the common scale of ops yet (refitted in the background once results arrive)" in said

    assert log.status == "success", log.error
    assert log.samples is not None and log.eval.metadata is not None and log.eval.metadata[RUN_ID] == run_id
    run_items = list(client.iter_run_items(run_id))
    assert sorted(sample.id for sample in log.samples) == sorted(item.item_id for item in run_items) == released.dev
    # The samples are the run's items as released: input and reference, incident date and digest.
    contents = {item.item_id: item for item in run_items}
    for sample in log.samples:
        item = contents[int(sample.id)]
        assert (sample.input, sample.target) == (item.content["input"], item.content["reference"])
        assert sample.metadata["occurred_at"] == item.content["occurred_at"] and sample.metadata["content_digest"] == item.content_digest
        assert sample.metadata["canary"] == released.release.canary and sample.metadata["release"] == 1

    # The ledger: every item went to m1-no in this run.
    exposures = client.item_exposures(run_items[0].item_id).exposures
    assert [(exposure.run_id, exposure.endpoint, exposure.trains_on_inputs) for exposure in exposures] == [(run_id, "m1-no", "no")]
    [share] = client.eval_exposure("ops").releases[0].endpoints
    assert (share.endpoint, share.items, share.runs) == ("m1-no", len(released.dev), 1)

    # The scores posted when the task ended: every sample's, with the mean Inspect reports.
    scores = [value_to_float()(sample.scores["goldenset"].value) for sample in log.samples if sample.scores]
    assert len(scores) == len(log.samples) and 0 < sum(scores) < len(scores)
    summary = client.get_run(run_id)
    assert (summary.scored, summary.remaining, summary.score.n) == (len(log.samples), 0, len(log.samples))
    assert summary.score.mean == pytest.approx(statistics.fmean(scores))
    assert log.results is not None
    assert log.results.scores[0].metrics["mean"].value == pytest.approx(statistics.fmean(scores))
    stored = {result.item_id: result.score for result in client.list_results(run_id)}
    assert stored == {int(sample.id): value_to_float()(sample.scores["goldenset"].value) for sample in log.samples if sample.scores}

    # Once the scale is refitted, the run's summary places it there.
    assert refit_stale(engine) == ["ops"]
    line = client.get_run(run_id).scale_line()
    assert line.startswith(f"run {run_id}: equated score ") and "on release 1 of ops (common scale version 1)" in line, line

    # Posting again (from the log, as another process would) is accepted unchanged; nothing is pending.
    assert pending_results(run_id) == [] and post_pending_results(run_id) is None
    logged_run, results = results_from_log(log)
    assert logged_run == run_id and {result.item_id: result.score for result in results} == stored
    again = client.post_results(run_id, results)
    assert (again.stored, again.unchanged, again.scored) == (0, len(results), len(results))


def test_scores_whose_posting_failed_stay_pending_and_post_later(ops: tuple[Client, Released], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client, released = ops
    task = goldenset_task(client, "ops", model="m1", endpoint="m1-no", scorer=includes(), occurred_after=None, name="flaky")
    assert task.metadata is not None
    run_id = task.metadata[RUN_ID]

    def down(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("goldenset is down")

    with monkeypatch.context() as patch:
        patch.setattr(client, "post_results", down)
        log = _run(task, _answers(client, every=2), tmp_path / "logs")
    assert log.status == "success" and log.eval.task == "flaky"
    assert client.get_run(run_id).scored == 0
    assert len(pending_results(run_id)) == len(released.dev)
    accepted = post_pending_results(run_id)
    assert accepted is not None and (accepted.scored, accepted.remaining) == (len(released.dev), 0)
    assert pending_results(run_id) == [] and post_pending_results(run_id) is None
    assert client.get_run(run_id).score.mean == pytest.approx(log.results.scores[0].metrics["mean"].value if log.results else -1)


@scorer(metrics=[])
def breaks_on(item_id: int) -> Scorer:
    """`includes()`, except that scoring `item_id` raises."""
    inner = includes()

    async def score(state: TaskState, target: Target) -> Score | None:
        if state.sample_id == item_id:
            raise RuntimeError("the grader broke")
        return await inner(state, target)

    return score


def test_an_eval_stopped_by_an_error_posts_the_scores_it_took(ops: tuple[Client, Released], tmp_path: Path) -> None:
    client, released = ops
    task = goldenset_task(client, "ops", model="m1", endpoint="m1-no", scorer=breaks_on(released.dev[-1]))
    assert task.metadata is not None
    run_id = task.metadata[RUN_ID]
    [log] = inspect_eval(task, model=_mock(_answers(client, every=2)), log_dir=str(tmp_path / "logs"), display="none", max_samples=1)
    assert log.status == "error" and log.error is not None and "the grader broke" in log.error.message
    # Every score taken before the error was posted; the broken item (and any sample cut short) stays unscored.
    _, results = results_from_log(log)
    summary = client.get_run(run_id)
    assert 0 < summary.scored == len(results) < len(released.dev) and summary.remaining == len(released.dev) - len(results)
    posted = {result.item_id: result.score for result in client.list_results(run_id)}
    assert posted == {result.item_id: result.score for result in results} and released.dev[-1] not in posted
    assert pending_results(run_id) == []


def test_the_dataset_loader_reads_the_dev_split_and_keeps_items_after_a_models_cutoff(ops: tuple[Client, Released]) -> None:
    client, released = ops
    rows = {row.id: row for row in client.iter_export("ops")}
    dataset = goldenset_dataset(client, "ops")
    assert sorted(int(sample.id) for sample in dataset if sample.id is not None) == released.dev == sorted(rows)
    for sample in dataset:
        row = rows[int(sample.id or 0)]
        assert (sample.input, sample.target) == (row.input, row.reference)
        assert sample.metadata is not None
        assert sample.metadata["occurred_at"] == row.occurred_at and sample.metadata["canary"] == released.release.canary
        assert {key: sample.metadata[key] for key in ("source", "external_id", "title", "tags", "eval", "release", "content_digest")} == {
            "source": row.source, "external_id": row.external_id, "title": row.title, "tags": row.tags, "eval": "ops", "release": 1, "content_digest": row.content_digest,
        }  # fmt: skip

    after = goldenset_dataset(client, "ops", model="m1")
    expected = sorted(row.id for row in rows.values() if row.occurred_at >= CUTOFF.isoformat())
    assert 0 < len(expected) < len(rows)
    assert sorted(int(sample.id or 0) for sample in after) == expected
    assert all(str((sample.metadata or {})["occurred_at"]) >= "2024-03-01" for sample in after)
    with pytest.raises(ValueError, match="no training cutoff"):
        goldenset_dataset(client, "ops", model="m0")
    # No run was started by reading.
    assert client.list_runs("ops") == []
