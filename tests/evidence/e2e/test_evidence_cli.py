"""`goldenset report temporal-split` and `goldenset probe`, run in-process against a migrated database."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from typer.testing import CliRunner

from schemas.corpus_results import CorpusResult
from schemas.item import Item
from schemas.model_registry import Model, TrainsOnInputs
from schemas.probes import Probe
from service.cli import app
from service.core.db import write_session
from service.core.settings import get_settings
from tests.conftest import TEST_SECRET_KEY
from tests.eval_support import kev_records
from tests.evidence_support import register_corpus, register_model
from tests.run_support import released_eval
from tests.support.corpora import KEV_CUTOFF, graded_scores
from tests.support.images import assert_png, assert_svg
from tests.support.ngram_server import WordNgramModel, serve_model


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setattr("service.evidence.cli.out", Console(width=240))
    monkeypatch.setenv("GOLDENSET_DATABASE_URL", database_url)
    monkeypatch.setenv("GOLDENSET_SECRET_KEY", TEST_SECRET_KEY)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def plain(output: str) -> str:
    """The output with panel borders removed and whitespace collapsed, so wrapped sentences read whole."""
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", output))


def test_report_temporal_split_prints_the_evidence_and_writes_the_chart(cli: CliRunner, engine: Engine, tmp_path: Path) -> None:
    register_corpus(engine, "cisa-kev", kev_records())
    register_model(engine, "inflated", cutoff=KEV_CUTOFF)
    register_model(engine, "undated", cutoff=None)
    rng = np.random.default_rng(11)
    with write_session(engine) as session:
        model = session.exec(select(Model).where(Model.name == "inflated")).one()
        for item in session.exec(select(Item)):
            mean = 0.65 if item.occurred_at.date() < KEV_CUTOFF else 0.55
            session.add(CorpusResult(model_id=model.id or 0, item_id=item.id or 0, score=float(graded_scores(rng, mean, 1)[0]), actor="test"))
        session.commit()
    shown = cli.invoke(app, ["report", "temporal-split", "--corpus", "cisa-kev", "--model", "inflated", "--chart", str(tmp_path / "split.svg")])
    assert shown.exit_code == 0, shown.output
    text = plain(shown.output)
    assert "flagged" in text and "not flagged" not in text and "95% interval" in text
    assert "evidence about one score (score) for one model (inflated)" in text and "not an accusation" in text
    assert "move the decision onto items dated on or after the model's training cutoff" in text
    assert_svg((tmp_path / "split.svg").read_bytes())
    as_json = cli.invoke(app, ["report", "temporal-split", "--corpus", "cisa-kev", "--model", "inflated", "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["flagged"] is True
    undated = cli.invoke(app, ["report", "temporal-split", "--corpus", "cisa-kev", "--model", "undated"])
    assert undated.exit_code == 2 and "no training cutoff registered" in plain(undated.output)
    assert cli.invoke(app, ["report", "temporal-split", "--corpus", "cisa-kev", "--model", "inflated", "--chart", "x.gif"]).exit_code == 2


def test_probe_runs_with_progress_stores_the_probe_and_writes_the_chart(cli: CliRunner, engine: Engine, tmp_path: Path) -> None:
    register_corpus(engine, "cisa-kev", kev_records(since="2023-06-01", until="2024-06-01"))
    with Session(engine) as session:
        memorised = [item.input for item in session.exec(select(Item)) if item.occurred_at.date() < KEV_CUTOFF]
    with serve_model(WordNgramModel.train(memorised), "kev-ngram") as server:
        register_model(engine, "kev-ngram", cutoff=KEV_CUTOFF, base_url=server.base_url, endpoints={"local": TrainsOnInputs.UNKNOWN})
        ran = cli.invoke(app, ["probe", "--corpus", "cisa-kev", "--model", "kev-ngram", "--endpoint", "local", "--limit", "120", "--chart", str(tmp_path / "probe.png")])
    assert ran.exit_code == 0, ran.output
    text = plain(ran.output)
    assert "levenshtein" in text and "lcs_ratio" in text and "reproduces the older items more closely" in text and "not an accusation" in text
    assert len(server.bodies) == 120
    assert_png((tmp_path / "probe.png").read_bytes())
    with Session(engine) as session:
        stored = session.exec(select(Probe)).one()
    assert (stored.status, stored.done, stored.total, stored.actor) == ("done", 120, 120, "cli")
    assert stored.report is not None and stored.report["metrics"][0]["flagged"] is True


def test_probe_refused_by_the_gate_exits_4_naming_the_condition(cli: CliRunner, engine: Engine) -> None:
    released_eval(engine, count=30)
    register_model(engine, "m1", cutoff=date(2024, 3, 1), endpoints={"m1-yes": TrainsOnInputs.YES})
    refused = cli.invoke(app, ["probe", "--eval", "ops", "--model", "m1", "--endpoint", "m1-yes"])
    assert refused.exit_code == 4 and "trains on its inputs" in plain(refused.output) and "condition: trains_on_inputs" in plain(refused.output)
    both = cli.invoke(app, ["probe", "--eval", "ops", "--corpus", "x", "--model", "m1", "--endpoint", "m1-yes"])
    assert both.exit_code == 2 and "exactly one of" in plain(both.output)
    missing = cli.invoke(app, ["probe", "--eval", "ops", "--model", "m1", "--endpoint", "m1-yes", "--api-key-env", "GOLDENSET_TEST_UNSET_KEY"])
    assert missing.exit_code == 2 and "is not set" in plain(missing.output)
