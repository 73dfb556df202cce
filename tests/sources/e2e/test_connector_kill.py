"""Every connector kind through a real `goldenset pull` process killed mid-pull (SIGKILL): the next
pull resumes from the last committed page and each record ends up stored exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.item import Item
from schemas.source import Source, SourceCreate
from service.core.db import write_transaction
from service.sources.definitions import create_source
from service.sources.pulls import pull_source
from tests.conftest import TEST_SECRET_KEY
from tests.replay.cases import CASES
from tests.replay.server import Reply, Request, serve

ROOT = Path(__file__).resolve().parents[3]


def _count(engine: Engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(Item)).one()


@pytest.mark.parametrize("kind", sorted(CASES))
def test_sigkill_mid_pull_then_pull_again_stores_each_record_once(kind: str, engine: Engine, database_url: str, shared_data: Path) -> None:
    case = CASES[kind](shared_data)

    def slow(request: Request) -> Reply:
        if case.is_page(request):
            time.sleep(0.1)
        return case.handler(request)

    with serve(slow) as server:
        with write_transaction(engine) as session:
            create_source(session=session, data=SourceCreate(name="killed", kind=kind, connector=case.config(server.url)), secret_key=TEST_SECRET_KEY, actor="test")
        env = {**os.environ, "GOLDENSET_DATABASE_URL": database_url, "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY}
        process = subprocess.Popen([sys.executable, "-m", "service.cli", "pull", "--source", "killed"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wanted = len(case.expected) // 3
        deadline = time.monotonic() + 120
        while _count(engine) < wanted:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the pull made no progress"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        killed_at = _count(engine)
        assert wanted <= killed_at < len(case.expected)
        with Session(engine) as session:
            assert session.exec(select(Source)).one().status == "running"  # it died without a word
        server.handler = case.handler
        summary = pull_source(engine=engine, name="killed", secret_key=TEST_SECRET_KEY, actor="test")  # the dead pull's lock died with it
    assert summary.rejected == 0
    with Session(engine) as session:
        items = session.exec(select(Item)).all()
        assert sorted(item.external_id for item in items) == sorted(case.expected)
        assert session.exec(select(Source)).one().status == "ok"
