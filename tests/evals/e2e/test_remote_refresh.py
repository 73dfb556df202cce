"""`goldenset refresh` over the API (--url): against a live server on loopback it writes the
period's release through `POST /v1/evals/{name}/refresh`, prints the line the command prints on
the database, and exits with the same statuses when the refresh cannot run."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from typer.testing import CliRunner

from schemas.evals import Eval
from schemas.release import Release
from service.cli import app
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder, ingest_and_curate
from tests.evals.integration.test_refresh import kev
from tests.support.command_line import command_line

EVAL = {"sources": ["kev"], "target_size": 10, "approval_policy": "auto", "sealed_fraction": 0.0}


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.evals.cli", "service.core.terminal")) as runner:
        yield runner


def _said(output: str) -> str:
    return " ".join(output.split())


def _releases(engine: Engine, eval_name: str) -> list[int]:
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == eval_name)).one()
        return sorted(release.number for release in session.exec(select(Release).where(Release.eval_id == evaluation.id)))


def test_refresh_over_the_api_prints_and_exits_as_on_the_database(cli: CliRunner, engine: Engine, live_server: LiveServer) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 21)])
    admin = live_server.token("admin", "read")
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {admin}"}) as api:
        for name in ("ops", "local"):
            api.post("/v1/evals", json={"name": name, **EVAL}).raise_for_status()
    remote = ["--url", live_server.url, "--token", admin]

    def both(*arguments: str) -> tuple[tuple[int, str], tuple[int, str]]:
        """The same refresh of `local` on the database and of `ops` over the API."""
        here = cli.invoke(app, ["refresh", "--eval", "local", *arguments])
        there = cli.invoke(app, [*remote, "refresh", "--eval", "ops", *arguments])
        return (here.exit_code, _said(here.output).replace("local", "EVAL")), (there.exit_code, _said(there.output).replace("ops", "EVAL"))

    # Written, then already written: the very same line both ways.
    here, there = both("--at", "2024-03-01")
    assert here == there == (0, "release 1 of EVAL written for the period 2024-03-01 03:00 to 2024-04-01 03:00 UTC: 10 dev + 0 sealed items; 10 added, 0 retired")
    here, there = both("--at", "2024-03-15T12:00:00")
    assert here == there and there[0] == 0 and there[1].startswith("release 1 of EVAL already written for the period 2024-03-01 03:00")

    # A future period is refused unless allowed; then one before the newest release's cannot run.
    here, there = both("--at", "2030-01-05")
    assert here == there and there[0] == 2 and "--allow-future" in there[1], (here, there)
    here, there = both("--at", "2030-01-05", "--allow-future")
    assert here == there and there[0] == 0 and there[1].startswith("release 2 of EVAL written for the period 2030-01-01 03:00"), (here, there)
    here, there = both("--at", "2024-04-05")
    assert here == there and there[0] == 2 and "releases are written in order" in there[1], (here, there)
    assert _releases(engine, "ops") == _releases(engine, "local") == [1, 2]

    # No such eval, a time that is no time: 2 both ways; over the API a token without the admin
    # scope is refused (4), and nothing was written.
    missing = cli.invoke(app, [*remote, "refresh", "--eval", "nope"])
    assert missing.exit_code == 2 and "nope" in missing.output, missing.output
    assert cli.invoke(app, [*remote, "refresh", "--eval", "ops", "--at", "March"]).exit_code == 2
    reader = cli.invoke(app, ["--url", live_server.url, "--token", live_server.token("read"), "refresh", "--eval", "ops", "--at", "2030-02-05", "--allow-future"])
    assert reader.exit_code == 4, reader.output
    assert _releases(engine, "ops") == [1, 2]
