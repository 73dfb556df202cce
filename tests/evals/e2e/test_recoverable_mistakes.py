"""Recoverable mistakes, over HTTP on a real server and from the command line: a refresh for a
period after the current one is refused unless allowed; a release can be withdrawn (kept, marked,
audited, out of `latest` and of the order of periods, its membership changes undone); an eval
without releases can be deleted."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from typer.testing import CliRunner

from schemas.audit import AuditEvent
from schemas.evals import EvalItem
from schemas.item import Item
from schemas.release import Release, ReleaseItem
from service.cli import app
from service.core.sessions import LOGIN_CSRF_COOKIE
from tests.conftest import LiveServer
from tests.eval_support import HashingEncoder, ingest_and_curate
from tests.evals.integration.test_refresh import kev
from tests.run_support import register
from tests.support.command_line import command_line

DEFINITION = {"name": "ops", "sources": ["kev"], "target_size": 10, "approval_policy": "auto", "max_age_days": None, "sealed_fraction": 0.3}


def _ids(engine: Engine) -> dict[int, int]:
    """Item id by KEV number."""
    with Session(engine) as session:
        return {int(item.external_id.rsplit("-", 1)[1]): item.id for item in session.exec(select(Item)) if item.id is not None}


def _members(engine: Engine) -> dict[int, tuple[int, int | None]]:
    """(first_release, retired_release) by item id."""
    with Session(engine) as session:
        return {row.item_id: (row.first_release, row.retired_release) for row in session.exec(select(EvalItem))}


def _actions(engine: Engine, action: str) -> list[AuditEvent]:
    with Session(engine) as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == action).order_by(col(AuditEvent.id))).all())


def test_a_future_release_is_refused_then_withdrawn_and_the_schedule_goes_on(live_server: LiveServer, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 21)])
    admin, reader = live_server.client("admin"), live_server.client("read")
    # No linking core: an eval created over HTTP draws its own seal key, and which members the core
    # reserves depends on which of them were sealed; here newest-first alone decides who retires.
    assert admin.post("/v1/evals", json={**DEFINITION, "linking_share": 0}).status_code == 201
    first = admin.post("/v1/evals/ops/refresh", params={"at": "2024-03-05T00:00:00Z"})
    assert first.status_code == 201, first.text
    ingest_and_curate(engine, "kev", [kev(n, f"2024-03-{n - 10:02d}") for n in range(21, 26)])
    ids = _ids(engine)

    refused = admin.post("/v1/evals/ops/refresh", params={"at": "2030-01-05T00:00:00Z"})
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert "2030-01-01T03:00:00+00:00" in detail and "--allow-future" in detail and "allow_future=true" in detail
    assert reader.get("/v1/evals/ops/releases/latest").json()["number"] == 1

    # The mistake, made on purpose: release 2 for 2030 takes the March items and displaces five members.
    future = admin.post("/v1/evals/ops/refresh", params={"at": "2030-01-05T00:00:00Z", "allow_future": "true"})
    assert future.status_code == 201, future.text
    assert (future.json()["release"]["number"], future.json()["release"]["period_start"]) == (2, "2030-01-01T03:00:00Z")
    assert sorted(future.json()["release"]["diff"]["added"]) == sorted(ids[n] for n in range(21, 26))
    assert _actions(engine, "release.create")[-1].details["allow_future"] is True
    stuck = admin.post("/v1/evals/ops/refresh", params={"at": "2024-04-05T00:00:00Z"})
    assert stuck.status_code == 409 and "releases are written in order" in stuck.json()["detail"]

    # Withdraw it: admin only, a reason required, once.
    assert reader.post("/v1/evals/ops/releases/2/withdraw", json={"reason": "refreshed for 2030 by mistake"}).status_code == 403
    assert admin.post("/v1/evals/ops/releases/2/withdraw", json={}).status_code == 422
    assert admin.post("/v1/evals/ops/releases/9/withdraw", json={"reason": "x"}).status_code == 404
    assert admin.post("/v1/evals/nope/releases/1/withdraw", json={"reason": "x"}).status_code == 404
    assert admin.post("/v1/evals/ops/releases/1/withdraw", json={"reason": "x"}).status_code == 409  # release 2 is newer and in force
    withdrawn = admin.post("/v1/evals/ops/releases/2/withdraw", json={"reason": "refreshed for 2030 by mistake"})
    assert withdrawn.status_code == 200, withdrawn.text
    assert withdrawn.json()["withdrawn"]["reason"] == "refreshed for 2030 by mistake" and withdrawn.json()["withdrawn"]["by"]
    again = admin.post("/v1/evals/ops/releases/2/withdraw", json={"reason": "again"})
    assert again.status_code == 409 and "withdrawn already" in again.json()["detail"]
    (event,) = _actions(engine, "release.withdrawn")
    assert (event.object_id, event.details["reason"], event.details["members_restored"], event.details["members_pending"]) == ("ops/2", "refreshed for 2030 by mistake", 5, 5)
    # The displaced members are members again; the March items stay members, pending a release in force.
    members = _members(engine)
    assert all(members[ids[n]] == (1, None) for n in range(11, 21)) and all(members[ids[n]] == (2, None) for n in range(21, 26))

    # Still readable by number, marked, and revalidated rather than cached as immutable.
    kept = reader.get("/v1/evals/ops/releases/2")
    assert kept.status_code == 200 and kept.json()["withdrawn"]["reason"] == "refreshed for 2030 by mistake" and len(kept.json()["items"]) == 10
    assert kept.headers["cache-control"] == "no-cache"
    assert reader.get("/v1/evals/ops/releases/1").headers["cache-control"].endswith("immutable")
    assert reader.get("/v1/evals/ops/releases/2/items").status_code == 200
    assert reader.get("/v1/evals/ops/releases/latest").json()["number"] == 1
    assert reader.get("/v1/evals/ops").json()["latest_release"] == 1
    assert [release["withdrawn"] is not None for release in reader.get("/v1/evals/ops/releases").json()] == [False, True]
    with httpx.Client(base_url=live_server.url, timeout=30) as browser:
        form = browser.get("/ui/login")
        signed_in = browser.post("/ui/login", data={"token": live_server.token("read"), "csrf": form.cookies[LOGIN_CSRF_COOKIE], "next": "/ui"})
        assert signed_in.status_code in (200, 303), signed_in.text
        listing = browser.get("/ui/evals/ops/releases")
        assert listing.status_code == 200 and "withdrawn" in listing.text
        shown = browser.get("/ui/evals/ops/releases/2")
        assert shown.status_code == 200 and "Withdrawn by" in shown.text and "refreshed for 2030 by mistake" in shown.text
    same_period = admin.post("/v1/evals/ops/refresh", params={"at": "2030-01-05T00:00:00Z", "allow_future": "true"})
    assert same_period.status_code == 409 and "was withdrawn" in same_period.json()["detail"]

    # The real next month is written again and becomes latest; it takes the March items as added.
    april = admin.post("/v1/evals/ops/refresh", params={"at": "2024-04-05T00:00:00Z"})
    assert april.status_code == 201, april.text
    release = april.json()["release"]
    assert (release["number"], release["period_start"], release["withdrawn"]) == (3, "2024-04-01T03:00:00Z", None)
    assert sorted(release["diff"]["added"]) == sorted(ids[n] for n in range(21, 26))
    assert sorted(entry["item_id"] for entry in release["diff"]["retired"]) == sorted(ids[n] for n in range(11, 16))
    assert reader.get("/v1/evals/ops/releases/latest").json()["number"] == 3
    members = _members(engine)
    assert all(members[ids[n]] == (3, None) for n in range(21, 26)) and all(members[ids[n]] == (1, 3) for n in range(11, 16))


def test_sealed_review_windows_count_from_the_release_in_force_once_a_newer_one_is_withdrawn(live_server: LiveServer, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 21)])
    admin = live_server.client("admin")
    assert admin.post("/v1/evals", json={**DEFINITION, "sealed_read_budget": 2}).status_code == 201
    assert admin.post("/v1/evals/ops/refresh", params={"at": "2024-03-05T00:00:00Z"}).status_code == 201
    reviewers = [live_server.client("curate", "sealed") for _ in range(3)]
    assert reviewers[0].post("/v1/evals/ops/sealed-review").json()["used"] == 1
    ingest_and_curate(engine, "kev", [kev(n, f"2024-03-{n - 10:02d}") for n in range(21, 26)])
    assert admin.post("/v1/evals/ops/refresh", params={"at": "2030-01-05T00:00:00Z", "allow_future": "true"}).status_code == 201
    assert admin.post("/v1/evals/ops/releases/2/withdraw", json={"reason": "refreshed for 2030 by mistake"}).status_code == 200
    # The coming release follows release 1 again: the window opened since then still counts.
    assert reviewers[1].post("/v1/evals/ops/sealed-review").json()["used"] == 2
    spent = reviewers[2].post("/v1/evals/ops/sealed-review")
    assert spent.status_code == 403 and spent.json()["used"] == 2


def test_delete_an_eval_only_while_no_release_is_in_force_and_no_run_used_one(live_server: LiveServer, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 6)])
    admin, reader = live_server.client("admin"), live_server.client("read")
    assert admin.post("/v1/evals", json={**DEFINITION, "name": "typo"}).status_code == 201
    assert admin.post("/v1/evals", json=DEFINITION).status_code == 201
    assert admin.post("/v1/evals/ops/refresh", params={"at": "2024-03-05T00:00:00Z"}).status_code == 201

    assert reader.delete("/v1/evals/typo").status_code == 403
    assert admin.delete("/v1/evals/nope").status_code == 404
    assert admin.delete("/v1/evals/typo").status_code == 204
    assert reader.get("/v1/evals/typo").status_code == 404
    assert [event.object_id for event in _actions(engine, "eval.delete")] == ["typo"]
    kept = admin.delete("/v1/evals/ops")
    assert kept.status_code == 409 and "release(s) 1 in force" in kept.json()["detail"] and "withdraw" in kept.json()["detail"]
    assert admin.post("/v1/evals/ops/releases/1/withdraw", json={"reason": "wrong sources"}).status_code == 200
    assert reader.get("/v1/evals/ops/releases/latest").status_code == 404
    # Every release withdrawn and no run served from one: the eval goes, with its withdrawn releases.
    assert admin.delete("/v1/evals/ops").status_code == 204
    assert reader.get("/v1/evals/ops").status_code == 404
    deleted = _actions(engine, "eval.delete")
    assert [event.object_id for event in deleted] == ["typo", "ops"] and deleted[1].details["withdrawn_releases"] == [1]
    with Session(engine) as session:
        assert session.exec(select(Release)).all() == [] and session.exec(select(ReleaseItem)).all() == []
    # An eval a run was served from is kept, withdrawn or not: the run's scores and the exposure ledger refer to it.
    register(engine)
    assert admin.post("/v1/evals", json=DEFINITION).status_code == 201
    assert admin.post("/v1/evals/ops/refresh", params={"at": "2024-03-05T00:00:00Z"}).status_code == 201
    assert reader.post("/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no"}).status_code == 201
    assert admin.post("/v1/evals/ops/releases/1/withdraw", json={"reason": "wrong sources"}).status_code == 200
    ran = admin.delete("/v1/evals/ops")
    assert ran.status_code == 409 and "1 run(s)" in ran.json()["detail"]
    # The name can be used again for a new eval.
    assert admin.post("/v1/evals", json={**DEFINITION, "name": "typo"}).status_code == 201


@pytest.fixture
def cli(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    with command_line(database_url, monkeypatch, encoder=HashingEncoder(), wide=("service.evals.cli",)) as runner:
        yield runner


def test_the_same_from_the_command_line(cli: CliRunner, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 21)])
    assert cli.invoke(app, ["eval", "create", "ops", "--source", "kev", "--target-size", "10", "--approval", "auto"]).exit_code == 0
    assert cli.invoke(app, ["refresh", "--eval", "ops", "--at", "2024-03-01"]).exit_code == 0

    refused = cli.invoke(app, ["refresh", "--eval", "ops", "--at", "2030-01-05"])
    assert refused.exit_code == 2 and "--allow-future" in refused.output
    future = cli.invoke(app, ["refresh", "--eval", "ops", "--at", "2030-01-05", "--allow-future"])
    assert future.exit_code == 0 and "release 2 of ops written for the period 2030-01-01" in future.output
    assert cli.invoke(app, ["refresh", "--eval", "ops", "--at", "2024-04-05"]).exit_code == 2

    assert cli.invoke(app, ["eval", "withdraw", "ops", "2"]).exit_code == 2  # --reason is required
    assert cli.invoke(app, ["eval", "withdraw", "ops", "9", "--reason", "x"]).exit_code == 2
    withdrawn = cli.invoke(app, ["eval", "withdraw", "ops", "2", "--reason", "refreshed for 2030 by mistake"])
    assert withdrawn.exit_code == 0 and "release 2 of ops" in withdrawn.output and "withdrawn" in withdrawn.output, withdrawn.output
    twice = cli.invoke(app, ["eval", "withdraw", "ops", "2", "--reason", "again"])
    said = " ".join(twice.output.split())
    assert twice.exit_code == 3 and "refused (withdrawn)" in said and "withdrawn already" in said  # a refused decision (service.cli)
    april = cli.invoke(app, ["refresh", "--eval", "ops", "--at", "2024-04-05"])
    assert april.exit_code == 0 and "release 3 of ops written for the period 2024-04-01" in april.output, april.output

    assert cli.invoke(app, ["eval", "create", "typo", "--source", "kev"]).exit_code == 0
    assert cli.invoke(app, ["eval", "delete", "typo"]).exit_code == 0
    assert cli.invoke(app, ["eval", "delete", "typo"]).exit_code == 2
    kept = cli.invoke(app, ["eval", "delete", "ops"])
    assert kept.exit_code == 2 and "release(s) 1, 3 in force" in " ".join(kept.output.split())
