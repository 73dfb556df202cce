"""Real goldenset processes for tests: `goldenset serve` replicas and `goldenset scheduler` workers on loopback, and PostgreSQL
databases of their own (created whatever GOLDENSET_TEST_DATABASES says: the tests that use them
are about PostgreSQL, and fail, never skip, when it is unreachable)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy.engine import make_url

from service.core.db import make_engine, migrate
from tests.conftest import POSTGRES_URL, REPO_ROOT, TEST_SECRET_KEY, _free_port, _pg_admin

GOLDENSET = str(Path(sys.executable).with_name("goldenset"))
START_SECONDS = 60


def process_environment(url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a goldenset process over `url`: test settings, plain-text logs, no
    background curation after ingest; `extra` adds `GOLDENSET_*` variables (`{"LOG_LEVEL": "INFO"}`)."""
    return {
        **os.environ,
        "GOLDENSET_DATABASE_URL": url,
        "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY,
        "GOLDENSET_ENV": "test",
        "GOLDENSET_CURATE_AFTER_INGEST": "false",
        "GOLDENSET_LOG_JSON": "false",
        "GOLDENSET_LOG_LEVEL": "WARNING",
        **{f"GOLDENSET_{name}": value for name, value in (extra or {}).items()},
    }


@dataclass
class Replica:
    """A `goldenset serve` process on a loopback port; its output goes to `log`."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no cleanup, as when a node dies."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def start_serve(url: str, log: Path, *, no_scheduler: bool = True, env: Mapping[str, str] | None = None) -> Replica:
    """Start `goldenset serve` over `url` (an API replica unless `no_scheduler=False`) and return it
    once `/healthz` answers 200; raises with the process's output when it exits or never answers."""
    port = _free_port()
    command = [GOLDENSET, "serve", "--host", "127.0.0.1", "--port", str(port), *(["--no-scheduler"] if no_scheduler else [])]
    with log.open("ab") as sink:
        process = subprocess.Popen(command, env=process_environment(url, env), cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT)
    replica = Replica(process, f"http://127.0.0.1:{port}", log)
    _wait_until_answering(replica, "/healthz", "goldenset serve")
    return replica


def start_scheduler(url: str, log: Path, *, env: Mapping[str, str] | None = None) -> Replica:
    """Start `goldenset scheduler` (role `worker`) over `url` with its metrics port on loopback, and
    return it once that port's `/healthz` answers 200 (database reachable, scheduler running);
    raises with the process's output when it exits or never answers. Its `url` is the metrics
    port's base URL."""
    port = _free_port()
    command = [GOLDENSET, "scheduler"]
    environment = process_environment(url, {"SCHEDULER_METRICS_PORT": str(port), **(env or {})})
    with log.open("ab") as sink:
        process = subprocess.Popen(command, env=environment, cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT)
    worker = Replica(process, f"http://127.0.0.1:{port}", log)
    _wait_until_answering(worker, "/healthz", "goldenset scheduler")
    return worker


def _wait_until_answering(replica: Replica, path: str, what: str) -> None:
    """Return once `replica` answers 200 on `path`; kill it and raise with its output when it exits
    or does not answer within START_SECONDS."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if replica.process.poll() is not None:
            raise RuntimeError(f"{what} exited with {replica.process.returncode}:\n{replica.output()[-4000:]}")
        try:
            if httpx.get(f"{replica.url}{path}", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    replica.kill()
    raise RuntimeError(f"{what} did not answer {path} within {START_SECONDS} s:\n{replica.output()[-4000:]}")


@contextmanager
def replicas(url: str, folder: Path, count: int = 2, env: Mapping[str, str] | None = None) -> Iterator[list[Replica]]:
    """`count` API replicas over one database for the block, stopped afterwards."""
    started: list[Replica] = []
    try:
        for number in range(count):
            started.append(start_serve(url, folder / f"replica-{number}.log", env=env))
        yield started
    finally:
        for replica in started:
            replica.stop()


@contextmanager
def postgres_database(template: str | None = None) -> Iterator[str]:
    """The URL of a new, migrated PostgreSQL database (copied from `template` when given), dropped
    when the block ends. Raises when PostgreSQL (GOLDENSET_TEST_POSTGRES_URL) is unreachable."""
    name = f"goldenset_proc_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    url = make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    try:
        if template is None:
            engine = make_engine(url)
            migrate(engine)
            engine.dispose()
        yield url
    finally:
        with _pg_admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
