"""`goldenset export` read by the harnesses themselves, offline: Hugging Face `datasets` loads the
JSONL and Parquet files with one row per dev item (the canary in each), the manifest lies beside
them, and `lm_eval` runs the task folder as written, from another working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from service.cli import app
from tests.eval_support import HashingEncoder
from tests.run_support import Released, released_eval
from tests.support.command_line import command_line

LM_EVAL = Path(sys.executable).with_name("lm_eval")

pytestmark = pytest.mark.usefixtures("logging_restored")


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Hugging Face caches under tmp_path (given explicitly too: `datasets` reads its variables at import), offline."""
    cache = tmp_path / "hf"
    for name, value in {"HF_HOME": cache, "HF_DATASETS_CACHE": cache / "datasets", "XDG_CACHE_HOME": tmp_path / "xdg-cache"}.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return cache / "datasets"


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.evals.cli",)) as runner:
        yield runner


@pytest.fixture
def released(engine: Engine) -> Released:
    return released_eval(engine, count=24, sealed_fraction=0.25)


def _export(cli: CliRunner, export_format: str, output: Path) -> None:
    result = cli.invoke(app, ["export", "--eval", "ops", "--format", export_format, "-o", str(output)])
    assert result.exit_code == 0, result.output


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _load(kind: str, path: Path, cache: Path) -> datasets.Dataset:
    loaded = datasets.load_dataset(kind, data_files=str(path), split="train", cache_dir=str(cache))
    assert isinstance(loaded, datasets.Dataset)
    return loaded


def test_jsonl_and_parquet_load_with_one_row_per_dev_item(cli: CliRunner, released: Released, hf_home: Path, tmp_path: Path) -> None:
    canary = released.release.canary
    jsonl, parquet = tmp_path / "out" / "ops.jsonl", tmp_path / "out" / "ops.parquet"
    _export(cli, "jsonl", jsonl)
    _export(cli, "parquet", parquet)

    rows = _rows(jsonl)
    from_json = _load("json", jsonl, hf_home)
    assert from_json.num_rows == len(released.dev) == len(rows)
    assert sorted(from_json["id"]) == released.dev
    assert all(row["metadata"]["canary"] == canary and row["split"] == "dev" for row in from_json)
    assert [row["input"] for row in from_json] == [row["input"] for row in rows]
    assert all(isinstance(row["metadata"]["item"], str) for row in from_json)

    for path in (jsonl, parquet):
        manifest = json.loads((path.parent / f"{path.stem}.manifest.json").read_text(encoding="utf-8"))
        assert manifest["dev_merkle_root"] == released.release.dev_root
        assert (manifest["dev_count"], manifest["sealed_count"]) == (len(released.dev), len(released.sealed))

    from_parquet = _load("parquet", parquet, hf_home)
    assert from_parquet.num_rows == len(released.dev)
    assert from_parquet["id"] == from_json["id"] and from_parquet["input"] == from_json["input"] and from_parquet["reference"] == from_json["reference"]
    assert [row["metadata"] for row in from_parquet] == [row["metadata"] for row in from_json]
    assert from_parquet["occurred_at"] == [row["occurred_at"] for row in rows]
    assert from_parquet.to_list() == rows


def test_the_lm_eval_task_folder_runs_as_written_from_elsewhere(cli: CliRunner, released: Released, hf_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tasks" / "ops"
    _export(cli, "lm-eval", folder)
    [config] = folder.glob("*.yaml")
    task = config.stem
    assert task == "goldenset_ops_r1_dev"
    assert {path.name for path in folder.iterdir()} >= {config.name, "dev.jsonl", "utils.py", "manifest.json"}
    assert json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["dev_merkle_root"] == released.release.dev_root
    assert released.release.canary in config.read_text(encoding="utf-8")
    assert len(_rows(folder / "dev.jsonl")) == len(released.dev)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(hf_home), "HF_HOME": str(hf_home.parent), "HOME": str(tmp_path / "home")}
    ran = subprocess.run(
        [str(LM_EVAL), "--model", "dummy", "--tasks", task, "--include_path", str(folder), "--limit", "3"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    table = [line for line in ran.stdout.splitlines() if line.startswith("|")]
    assert any(line.startswith(f"|{task}") for line in table), ran.stdout
    assert {"bleu", "exact_match"} <= {cell.strip() for line in table for cell in line.split("|")}
    assert not (elsewhere / "data").exists() and list(elsewhere.iterdir()) == []
