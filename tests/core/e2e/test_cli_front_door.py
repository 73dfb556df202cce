"""The command line as a newcomer meets it: `--help` at once, `--version`, `--json` on every
listing, no database created by accident; and the curator commands run against a live server
over its API (GOLDENSET_URL/GOLDENSET_TOKEN) with no database configured, as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from sqlalchemy.engine import Engine

from schemas.model_registry import TrainsOnInputs
from service.cli import COMMANDS, load_command
from tests.conftest import LiveServer
from tests.evidence_support import register_model
from tests.run_support import released_eval
from tests.support.ngram_server import WordNgramModel, serve_model

GOLDENSET = str(Path(sys.executable).with_name("goldenset"))


def _run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("GOLDENSET_")}
    environment.update({"COLUMNS": "200", **(env or {})})
    return subprocess.run([GOLDENSET, *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=120, check=False)


def test_help_answers_in_under_a_second_and_lists_every_command(tmp_path: Path) -> None:
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        shown = _run(["--help"], cwd=tmp_path)
        timings.append(time.perf_counter() - started)
        assert shown.returncode == 0, shown.stderr
    assert min(timings) < 1.0, timings
    for name in COMMANDS:
        assert f" {name} " in shown.stdout, name
    version = _run(["--version"], cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == "goldenset 0.1.0"


def test_the_help_table_says_what_each_command_says_of_itself() -> None:
    for name, (_, line) in COMMANDS.items():
        command = load_command(name)
        assert " ".join((command.help or "").strip().split("\n\n")[0].split()) == line, name


def _walk(command: object, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], object]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _walk(sub, (*path, name))
    return found


def test_every_listing_command_takes_json() -> None:
    listings = []
    for name in COMMANDS:
        for path, command in _walk(load_command(name), (name,)):
            if path[-1] == "list" or path in {("audit",), ("dedup", "stats")}:
                listings.append(path)
                assert "--json" in {opt for param in command.params for opt in param.opts}, path  # type: ignore[attr-defined]
    assert {("eval", "list"), ("source", "list"), ("token", "list"), ("model", "list"), ("endpoint", "list"), ("run", "list"), ("audit",)} <= set(listings)


def test_a_command_never_creates_a_missing_database(tmp_path: Path) -> None:
    listed = _run(["eval", "list"], cwd=tmp_path)
    said = " ".join(listed.stderr.split())  # the message is wrapped to the terminal's width
    assert listed.returncode == 2 and "there is no database at" in said and "goldenset migrate" in said
    assert not (tmp_path / "var").exists()
    remote_only = _run(["token", "list"], cwd=tmp_path, env={"GOLDENSET_URL": "http://127.0.0.1:9"})
    assert remote_only.returncode == 2 and "works on the database" in remote_only.stderr
    created = _run(["migrate"], cwd=tmp_path)
    assert created.returncode == 0 and (tmp_path / "var" / "goldenset.db").exists()
    assert _run(["eval", "list", "--json"], cwd=tmp_path).stdout.strip() == "[]"


@pytest.fixture
def remote(live_server: LiveServer, engine: Engine, tmp_path: Path) -> dict[str, str]:
    """A released eval `ops` with a run of model m1 scored on it, and the environment of a CLI
    that reaches the server over its API, with a database URL pointing at nothing."""
    released_eval(engine, count=40, sealed_fraction=0.25)
    register_model(engine, "m1", cutoff=date(2024, 3, 1), endpoints={"m1-no": TrainsOnInputs.NO})
    with live_server.client("read") as client:
        run = client.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no"}).raise_for_status().json()
        scores = [{"item_id": item["item_id"], "score": 0.25 if item["occurred_at"] < "2024-03-01" else 0.75} for item in run["items"]]
        client.post(f"/v1/runs/{run['id']}/results", json={"results": scores}).raise_for_status()
    return {
        "GOLDENSET_URL": live_server.url,
        "GOLDENSET_TOKEN": live_server.token("read", "curate", "admin"),
        "GOLDENSET_DATABASE_URL": f"sqlite:///{tmp_path / 'absent' / 'none.db'}",
        "run": str(run["id"]),
    }


def test_curator_commands_work_over_the_api_with_no_database(live_server: LiveServer, remote: dict[str, str], tmp_path: Path) -> None:
    env = {key: value for key, value in remote.items() if key.startswith("GOLDENSET_")}
    work = tmp_path / "work"
    work.mkdir()
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {remote['GOLDENSET_TOKEN']}"}) as api:
        manifest = api.get("/v1/evals/ops/releases/latest").raise_for_status().json()
    dev = {entry["item_id"] for entry in manifest["items"] if entry["split"] == "dev"}

    exported = _run(["export", "--eval", "ops", "-o", "out/ops.jsonl"], cwd=work, env=env)
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in (work / "out" / "ops.jsonl").read_text().splitlines()]
    assert {row["id"] for row in rows} == dev and {row["metadata"]["canary"] for row in rows} == {manifest["canary"]}
    assert json.loads((work / "out" / "ops.manifest.json").read_text())["dev_merkle_root"] == manifest["dev_merkle_root"]
    parquet = _run(["export", "--eval", "ops", "--format", "parquet", "-o", "ops.parquet"], cwd=work, env=env)
    assert parquet.returncode == 0, parquet.stderr
    assert sorted(pq.read_table(work / "ops.parquet").column("id").to_pylist()) == sorted(dev)
    task_folder = _run(["export", "--eval", "ops", "--format", "lm-eval", "-o", "lm"], cwd=work, env=env)
    assert task_folder.returncode == 0 and "goldenset_ops_r1_dev" in task_folder.stderr, task_folder.stderr
    assert {path.name for path in (work / "lm").iterdir()} == {"goldenset_ops_r1_dev.yaml", "dev.jsonl", "utils.py", "manifest.json"}
    assert len((work / "lm" / "dev.jsonl").read_text().splitlines()) == len(dev)

    verified = _run(["verify", "--eval", "ops"], cwd=work, env=env)
    assert verified.returncode == 0 and f"{len(dev)} dev items as served" in verified.stdout, verified.stdout + verified.stderr

    report = _run(["report", "temporal-split", "--model", "m1", "--eval", "ops", "--json"], cwd=work, env=env)
    assert report.returncode == 0, report.stderr
    figures = json.loads(report.stdout)
    assert figures["kind"] == "temporal_split" and figures["difference"] == pytest.approx(-0.5)

    decided = _run(["review", "--reject", str(min(dev)), "--reason", "a test"], cwd=work, env=env)
    assert decided.returncode == 0 and f"rejected: {min(dev)}" in decided.stdout, decided.stdout + decided.stderr
    again = _run(["review", "--reject", str(min(dev)), "--reason", "a test"], cwd=work, env=env)  # refused, named, exit 3
    assert again.returncode == 3 and f"item {min(dev)}" in again.stderr, again.stdout + again.stderr

    listings: dict[tuple[str, ...], Callable[[Any], bool]] = {
        ("model", "list", "--json"): lambda data: [model["name"] for model in data] == ["m1"],
        ("endpoint", "list", "--json"): lambda data: [(e["name"], e["augmented"]) for e in data] == [("m1-no", False)],
        ("run", "list", "--eval", "ops", "--json"): lambda data: [run["id"] for run in data] == [int(remote["run"])],
        ("run", "show", remote["run"], "--json"): lambda data: data["scored"] == data["item_count"] > 0,
        ("audit", "--action", "run.*", "--json"): lambda data: any(event["action"] == "run.start" for event in data),
        ("eval", "list", "--json"): lambda data: [entry["name"] for entry in data] == ["ops"],
        ("source", "list", "--json"): lambda data: [(entry["name"], entry["item_count"]) for entry in data] == [("kev", 40)],
        ("dedup", "stats", "--json"): lambda data: data["items"] == 40,
    }
    for args, check in listings.items():
        answer = _run(list(args), cwd=work, env=env)
        assert answer.returncode == 0 and check(json.loads(answer.stdout)), (args, answer.stdout, answer.stderr)
    flagged = _run(["endpoint", "update", "m1-no", "--augmentation", "retrieval"], cwd=work, env=env)
    assert flagged.returncode == 0 and "augmented true" in flagged.stdout, flagged.stderr

    missing = _run(["export", "--eval", "nope", "-o", "x.jsonl"], cwd=work, env=env)
    assert missing.returncode == 2 and "nope" in missing.stderr
    refused = _run(["model", "list"], cwd=work, env={**env, "GOLDENSET_TOKEN": "gs_not_a_token"})
    assert refused.returncode == 4
    no_token = _run(["model", "list"], cwd=work, env={"GOLDENSET_URL": live_server.url})
    assert no_token.returncode == 2 and "GOLDENSET_TOKEN" in no_token.stderr
    assert not (tmp_path / "absent").exists() and not (work / "var").exists()




def test_a_probe_runs_on_the_service_and_an_augmented_endpoint_is_refused(live_server: LiveServer, engine: Engine, tmp_path: Path) -> None:
    released_eval(engine, count=60, sealed_fraction=0.0)
    env = {"GOLDENSET_URL": live_server.url, "GOLDENSET_TOKEN": live_server.token("read", "admin"), "GOLDENSET_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}"}
    with serve_model(WordNgramModel.train(["a b c d e f"]), "m1") as model_server:
        register_model(engine, "m1", cutoff=date(2024, 3, 1), base_url=model_server.base_url, endpoints={"m1-no": TrainsOnInputs.NO})
        probed = _run(["probe", "--model", "m1", "--endpoint", "m1-no", "--eval", "ops", "--limit", "12", "--json"], cwd=tmp_path, env=env)
        assert probed.returncode == 0, probed.stdout + probed.stderr
        assert _run(["endpoint", "update", "m1-no", "--augmentation", "web_search"], cwd=tmp_path, env=env).returncode == 0
        refused = _run(["probe", "--model", "m1", "--endpoint", "m1-no", "--eval", "ops", "--limit", "12"], cwd=tmp_path, env=env)
        sent = len(model_server.bodies)
    report = json.loads(probed.stdout)
    assert (report["n_pre_cutoff"], report["n_control"]) == (6, 6) and sent == 12
    assert refused.returncode == 4 and "is augmented (web_search)" in refused.stderr and "augmented_endpoint" in refused.stderr
    assert not (tmp_path / "none.db").exists()
