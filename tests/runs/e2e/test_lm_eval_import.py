"""An lm-evaluation-harness run posted as a goldenset run: the task exported by `goldenset export
--format lm-eval` is run by the real `lm_eval` with `--log_samples`, and `goldenset run
import-lm-eval` starts the run of the samples' release (so the ledger records the endpoint), posts
each item's metric, and shows the run's score and its place on the common scale, on the database
and over the API. Files that are not one exported task's per-item scores are refused, naming the
line and what to do, with nothing started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from typer.testing import CliRunner

from schemas.runs import Result, Run
from service.cli import app
from service.evals.scale import refit_stale
from service.runs.lm_eval_import import SamplesFileError, read_samples
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder
from tests.run_support import Released, register, released_eval
from tests.support.command_line import command_line

LM_EVAL = Path(sys.executable).with_name("lm_eval")

pytestmark = pytest.mark.usefixtures("logging_restored")


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.evals.cli", "service.runs.cli")) as runner:
        yield runner


@pytest.fixture
def released(engine: Engine) -> Released:
    found = released_eval(engine, count=16, sealed_fraction=0.25)
    register(engine, model="m1")
    return found


def _samples(cli: CliRunner, tmp_path: Path) -> Path:
    """Export the eval for lm-eval, run the real harness on 6 items with its dummy model, and
    return the samples file it logged."""
    folder = tmp_path / "task"
    exported = cli.invoke(app, ["export", "--eval", "ops", "--format", "lm-eval", "-o", str(folder)])
    assert exported.exit_code == 0, exported.output
    cache = tmp_path / "hf"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(cache / "datasets"), "HF_HOME": str(cache), "HOME": str(tmp_path / "home")}
    command = [str(LM_EVAL), "--model", "dummy", "--tasks", "goldenset_ops_r1_dev", "--include_path", str(folder), "--limit", "6"]
    command += ["--log_samples", "--output_path", str(tmp_path / "out")]
    ran = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    [samples] = (tmp_path / "out").rglob("samples_goldenset_ops_r1_dev_*.jsonl")
    return samples


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_an_lm_eval_run_is_posted_as_a_run_once_and_placed_on_the_scale(cli: CliRunner, engine: Engine, released: Released, tmp_path: Path) -> None:
    samples = _samples(cli, tmp_path)
    logged = _lines(samples)
    assert len(logged) == 6 and all("exact_match" in line and line["doc"]["id"] in released.dev for line in logged)
    # The harness's dummy model answers nothing right; give half the items a right answer, as a model would.
    for index, line in enumerate(logged):
        line["exact_match"] = float(index % 2 == 0)
    scored = _write(tmp_path / "scored.jsonl", logged)

    imported = cli.invoke(app, ["run", "import-lm-eval", str(scored), "--model", "m1", "--endpoint", "m1-no"])
    assert imported.exit_code == 0, imported.output
    assert "imported 6 exact_match scores from scored.jsonl into run" in imported.output
    assert "6 of 12 items scored; score 0.500" in imported.output
    assert "not on the common scale yet" in imported.output
    with Session(engine) as session:
        [run] = session.exec(select(Run)).all()
        results = {result.item_id: result.score for result in session.exec(select(Result)).all()}
    assert (run.release_id, run.split, run.item_count) == (released.release.id, "dev", len(released.dev))
    assert results == {line["doc"]["id"]: line["exact_match"] for line in logged}

    # The same file again finds the same run; its scores are unchanged. After a refit, the run is on the scale.
    assert refit_stale(engine) == ["ops"]
    again = cli.invoke(app, ["run", "import-lm-eval", str(scored), "--model", "m1", "--endpoint", "m1-no", "--json"])
    assert again.exit_code == 0, again.output
    shown = json.loads(again.stdout)
    assert shown["id"] == run.id and shown["scored"] == 6 and shown["scale"]["fit_version"] == 1
    assert shown["scale"]["equated_score"]["low"] <= shown["scale"]["equated_score"]["value"] <= shown["scale"]["equated_score"]["high"]
    with Session(engine) as session:
        assert len(session.exec(select(Run)).all()) == 1

    # The per-sample bleu is a pair lm-eval aggregates over the task, not an item's score.
    refused = cli.invoke(app, ["run", "import-lm-eval", str(scored), "--model", "m1", "--endpoint", "m1-no", "--metric", "bleu"])
    assert refused.exit_code == 2 and "is a pair lm-eval aggregates over the whole task" in refused.output


def test_an_import_over_the_api_starts_the_run_under_the_token(live_server: LiveServer, cli: CliRunner, engine: Engine, released: Released, tmp_path: Path) -> None:
    samples = _samples(cli, tmp_path)
    token = live_server.token("read")
    imported = cli.invoke(app, ["--url", live_server.url, "--token", token, "run", "import-lm-eval", str(samples), "--model", "m1", "--endpoint", "m1-no", "--json"])
    assert imported.exit_code == 0, imported.output
    shown = json.loads(imported.stdout)
    assert shown["scored"] == 6 and shown["score"]["mean"] == 0.0 and shown["scale"] is None
    with Session(engine) as session:
        [run] = session.exec(select(Run)).all()
    assert run.actor.startswith("token:") and run.token_id is not None
    # An endpoint the registry does not know is refused before anything is posted.
    unknown = cli.invoke(app, ["--url", live_server.url, "--token", token, "run", "import-lm-eval", str(samples), "--model", "m1", "--endpoint", "nowhere"])
    assert unknown.exit_code == 2 and "nowhere" in unknown.output


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda lines: [*lines[:1], "not json"], "line 2 of bad.jsonl is not JSON"),
        (lambda lines: [{**lines[0], "doc": {"question": "?"}}], "line 1 has no goldenset row under `doc`"),
        (
            lambda lines: [lines[0], {**lines[1], "doc": {**lines[1]["doc"], "metadata": {**lines[1]["doc"]["metadata"], "release": 2}}}],
            "line 2 is from ops release 2 (dev), line 1 from ops release 1 (dev)",
        ),
        (lambda lines: [{key: value for key, value in lines[0].items() if key != "exact_match"}], "line 1 has no metric 'exact_match' (the sample's metrics: "),
        (lambda lines: [{**lines[0], "exact_match": 3.0}], "line 1: 'exact_match' is 3.0; goldenset takes per-item scores in [0, 1]"),
        (lambda lines: [{**lines[0], "exact_match": 1.0}, {**lines[0], "exact_match": 0.0, "filter": "strict"}], "is logged twice with different 'exact_match'"),
        (lambda lines: [], "holds no samples"),
    ],
)
def test_files_that_are_not_one_tasks_per_item_scores_are_refused(change: Any, message: str, tmp_path: Path) -> None:
    row = {"id": 7, "split": "dev", "input": "x", "reference": "y", "metadata": {"canary": "c", "eval": "ops", "release": 1, "item": "{}"}}
    sample = {"doc_id": 0, "doc": row, "target": "y", "filter": "none", "metrics": ["bleu", "exact_match"], "exact_match": 1.0, "bleu": ["y", "x"]}
    lines = [sample, {**sample, "doc_id": 1, "doc": {**row, "id": 8}}]
    bad = tmp_path / "bad.jsonl"
    changed = change(lines)
    bad.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in changed), encoding="utf-8")
    with pytest.raises(SamplesFileError) as refused:
        read_samples(bad)
    assert message in str(refused.value)
