"""`goldenset report public-inflation`, in-process on the database and over the API (`--url`) against
a live server, with simulated models scored over HTTP: the same report both ways as the API's, for a
person or as JSON, and the same exit status when something is missing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from service.cli import app
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder
from tests.evidence_support import PUBLIC_CORPUS, inflation_bench, post_scores
from tests.support.command_line import command_line
from tests.support.images import assert_png, assert_svg
from tests.support.inflation_world import inflation_world

REFERENCES = [f"ref-{number:02d}" for number in range(6)]


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.evidence.cli", "service.core.terminal")) as runner:
        yield runner


def assert_svg_bytes(path: Path) -> bytes:
    """The file's bytes, checked to be an SVG image."""
    content = path.read_bytes()
    assert_svg(content)
    return content


def plain(output: str) -> str:
    """The output with panel borders removed and whitespace collapsed, so wrapped sentences read whole."""
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", output))


def test_the_report_on_the_database_and_over_the_api_is_the_apis(cli: CliRunner, engine: Engine, live_server: LiveServer, tmp_path: Path) -> None:
    bench = inflation_bench(engine, [*REFERENCES, "primed", "lonely"])
    rng = np.random.default_rng(41)
    world = inflation_world(rng, references=len(REFERENCES), private_items=len(bench.dev), public_items=len(bench.corpus), inflation=0.20, target_ability=0.0)
    with live_server.client("read") as client:
        for k, name in enumerate(REFERENCES):
            post_scores(client, bench, name, world.reference_private[k], world.reference_public[k])
        post_scores(client, bench, "primed", world.target_private, world.target_public)
        api = client.get("/v1/reports/public-inflation", params={"eval": "ops", "corpus": PUBLIC_CORPUS, "model": "primed"}).json()
    asked = ["report", "public-inflation", "--eval", "ops", "--corpus", PUBLIC_CORPUS, "--model", "primed"]
    remote = ["--url", live_server.url, "--token", live_server.token("read")]

    here, there = cli.invoke(app, [*asked, "--json"]), cli.invoke(app, [*remote, *asked, "--json"])
    assert here.exit_code == there.exit_code == 0, (here.output, there.output)
    assert json.loads(here.stdout) == json.loads(there.stdout) == api
    assert api["flagged"] is True and [reference["model"] for reference in api["references"]] == REFERENCES

    shown = cli.invoke(app, [*asked, "--chart", str(tmp_path / "inflation.svg")])
    assert shown.exit_code == 0, shown.output
    assert b"primed on public-kev against ops" in assert_svg_bytes(tmp_path / "inflation.svg")
    assert cli.invoke(app, [*remote, *asked, "--chart", str(tmp_path / "inflation.png")]).exit_code == 0
    assert_png((tmp_path / "inflation.png").read_bytes())
    assert cli.invoke(app, [*asked, "--chart", "x.gif"]).exit_code == 2
    text = plain(shown.output)
    assert "primed on public-kev against ops" in text and all(name in text for name in REFERENCES)
    assert f"difference {api['difference'] * 100:+.1f} points, 90% interval" in text and "flagged" in text and "not flagged" not in text
    assert "evidence about one score (the public score on public-kev) for one model (primed)" in text and "not a verdict" in text
    assert "chart written to" in text and "".join(text.split()).endswith("".join(f"chart written to {tmp_path / 'inflation.svg'}".split()))
    assert plain(cli.invoke(app, [*remote, *asked]).output) == plain(cli.invoke(app, asked).output)

    for arguments, message in (
        (["--model", "ghost"], "model 'ghost' is not registered"),
        (["--model", "lonely"], "no results of model 'lonely' in any dev run of eval 'ops'"),
        (["--corpus", "kev"], "holds private incidents, not a public corpus"),
    ):
        asked_here = [*asked[:2], "--eval", "ops", "--corpus", PUBLIC_CORPUS, "--model", "primed", *arguments]
        refused_here, refused_there = cli.invoke(app, asked_here), cli.invoke(app, [*remote, *asked_here])
        assert refused_here.exit_code == refused_there.exit_code == 2, (refused_here.output, refused_there.output)
        assert message in plain(refused_here.output) and message in plain(refused_there.output)
