"""Exactly once, across processes: `goldenset refresh` run concurrently for one period, and a
refresh killed with SIGKILL half way through its transaction, then run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.evals import EvalCreate, EvalItem
from schemas.release import Release
from service.core.db import write_transaction
from service.evals.definitions import create_eval, require_eval
from service.evals.releases import manifest
from tests.conftest import REPO_ROOT, TEST_SECRET_KEY
from tests.eval_support import ingest_and_curate, kev_records
from tests.support.paused_refresh import PAUSE_MARKER

GOLDENSET = str(Path(sys.executable).with_name("goldenset"))
KEY = bytes(range(32))


def _setup(engine: Engine, *names: str, max_age_days: int = 365) -> None:
    ingest_and_curate(engine, "kev", kev_records(since="2024-01-01", until="2024-05-01"))
    with write_transaction(engine) as session:
        for name in names:
            data = EvalCreate(name=name, sources=["kev"], approval_policy="auto", max_age_days=max_age_days)
            create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=KEY)


def _refresh(database_url: str, name: str, at: str, *, pause_seconds: float | None = None) -> subprocess.Popen[str]:
    """`goldenset refresh` in a new process; with `pause_seconds`, one that stops for that long
    after flushing the release and before committing it (`tests.support.paused_refresh`)."""
    environment = {**os.environ, "GOLDENSET_DATABASE_URL": database_url, "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY}
    arguments = ["--eval", name, "--at", at]
    command = [GOLDENSET, "refresh", *arguments] if pause_seconds is None else [sys.executable, "-m", "tests.support.paused_refresh", str(pause_seconds), *arguments]
    return subprocess.Popen(command, env=environment, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_concurrent_refreshes_of_one_period_write_one_release(engine: Engine, database_url: str) -> None:
    _setup(engine, "ops")
    processes = [_refresh(database_url, "ops", at) for at in ("2024-05-01", "2024-05-02T10:00:00Z", "2024-05-31")]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    assert sorted(" written" in out and "already" not in out for out, _ in outputs) == [False, False, True]
    with Session(engine) as session:
        releases = session.exec(select(Release)).all()
        assert len(releases) == 1 and releases[0].number == 1
        assert len(session.exec(select(EvalItem)).all()) == releases[0].dev_count + releases[0].sealed_count > 0


def test_a_refresh_killed_mid_transaction_leaves_nothing_and_the_rerun_completes_it(engine: Engine, database_url: str) -> None:
    _setup(engine, "killed", "control", max_age_days=45)
    for name in ("killed", "control"):
        assert _refresh(database_url, name, "2024-04-01").wait(timeout=120) == 0
    victim = _refresh(database_url, "killed", "2024-05-01", pause_seconds=120)
    assert victim.stderr is not None
    deadline = time.monotonic() + 120
    seen: list[str] = []
    while PAUSE_MARKER not in (line := victim.stderr.readline()):
        seen.append(line)
        assert time.monotonic() < deadline and victim.poll() is None, f"the refresh never reached its pause: {''.join(seen)}"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    with Session(engine) as session:
        evaluation = require_eval(session=session, name="killed")
        assert [release.number for release in session.exec(select(Release).where(Release.eval_id == evaluation.id))] == [1]

    for name in ("killed", "control"):
        rerun = _refresh(database_url, name, "2024-05-01")
        out, err = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, err
    with Session(engine) as session:
        manifests = {}
        for name in ("killed", "control"):
            evaluation = require_eval(session=session, name=name)
            release = session.exec(select(Release).where(Release.eval_id == evaluation.id, Release.number == 2)).one()
            manifests[name] = manifest(session=session, evaluation=evaluation, release=release).model_dump(exclude={"eval", "created_at", "canary"})
            retired = session.exec(select(EvalItem).where(EvalItem.eval_id == evaluation.id, EvalItem.retired_release == 2)).all()
            assert len(retired) == len(manifests[name]["diff"]["retired"])
    assert manifests["killed"] == manifests["control"], (out, err)
    assert manifests["killed"]["items"] and manifests["killed"]["diff"]["retired"]
