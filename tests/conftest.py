"""Shared fixtures: a freshly migrated database per test, on every backend named in
GOLDENSET_TEST_DATABASES (default `sqlite`; `make test` and CI use `sqlite,postgresql`), an app,
and a real uvicorn server on loopback.

PostgreSQL is never skipped: when it is asked for and unreachable, the tests that need it error.

The tests are grouped by domain, then by kind: `tests/<domain>/<kind>/test_*.py`. The plugins below
mark each test with its kind (`tests.plugins.kinds`) and give every domain the fixtures that more
than one uses: the real embedding model (`encoder`) and logging put back after a harness
(`logging_restored`). Fixtures of one folder stay in its conftest (`tests/ui/browser/`,
`tests/core/e2e/`).
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import psycopg
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session

from service.app import create_app
from service.core.db import make_engine, migrate, write_transaction
from service.core.logs import configure_logging
from service.core.settings import Settings
from service.core.tokens import create_token

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
BACKENDS = [name.strip() for name in os.environ.get("GOLDENSET_TEST_DATABASES", "sqlite").split(",") if name.strip()]
POSTGRES_URL = os.environ.get("GOLDENSET_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
TEST_SECRET_KEY = "test-secret-key-0123456789abcdef0123456789abcdef"
TEST_RATE_LIMIT = "100000/minute"

pytest_plugins = ("tests.plugins.kinds", "tests.plugins.embedding_model", "tests.plugins.harness_logging")


def _pg_admin() -> psycopg.Connection[tuple[object, ...]]:
    url = make_url(POSTGRES_URL)
    return psycopg.connect(host=url.host, port=url.port or 5432, user=url.username, password=url.password, dbname=url.database, autocommit=True)


@pytest.fixture(scope="session")
def _templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One migrated template per backend, copied for each test (much faster than migrating each time)."""
    templates: dict[str, str] = {}
    created_pg: str | None = None
    if "sqlite" in BACKENDS:
        path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
        engine = make_engine(f"sqlite:///{path}")
        migrate(engine)
        engine.dispose()
        templates["sqlite"] = str(path)
    if "postgresql" in BACKENDS:
        name = f"goldenset_tmpl_{uuid.uuid4().hex[:10]}"
        with _pg_admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created_pg = name
        engine = make_engine(make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False))
        migrate(engine)
        engine.dispose()
        templates["postgresql"] = name
    yield templates
    if created_pg:
        with _pg_admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{created_pg}" WITH (FORCE)')


@contextmanager
def new_database(backend: str, templates: dict[str, str], folder: Path) -> Iterator[str]:
    """The URL of a new, migrated, empty database on `backend` (a SQLite file in `folder`, or a
    PostgreSQL database copied from the template), dropped when the block ends."""
    if backend == "sqlite":
        path = folder / "goldenset.db"
        shutil.copyfile(templates["sqlite"], path)
        yield f"sqlite:///{path}"
        return
    if backend != "postgresql":
        raise ValueError(f"unknown backend {backend!r} in GOLDENSET_TEST_DATABASES")
    name = f"goldenset_test_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{templates["postgresql"]}"')
    yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    with _pg_admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, _templates: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """The URL of a new, migrated, empty database on one backend."""
    with new_database(request.param, _templates, tmp_path) as url:
        yield url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    with Session(engine, expire_on_commit=False) as session:
        yield session


def make_settings(database_url: str) -> Settings:
    """The tests' settings: no background curation after API ingest (it loads the embedding model;
    dedup tests turn it on), a 1 MiB body limit, and per-address limits on sign-ins and 401s far
    above the defaults: every test client is 127.0.0.1, and a fuzzer or a walk of every route
    without a token gets thousands of 401s a minute (the limits' own tests set them low)."""
    return Settings(
        env="test",
        database_url=database_url,
        secret_key=TEST_SECRET_KEY,
        log_json=False,
        max_body_bytes=1024 * 1024,
        curate_after_ingest=False,
        sign_in_rate_limit=TEST_RATE_LIMIT,
        unauthorized_rate_limit=TEST_RATE_LIMIT,
    )


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
def app(settings: Settings, engine: Engine) -> FastAPI:
    return create_app(settings, engine=engine)


TOKEN_NUMBERS = itertools.count(1)


@dataclass
class LiveServer:
    """A uvicorn server on 127.0.0.1 serving the app, with a helper to mint tokens."""

    url: str
    engine: Engine
    settings: Settings

    def token(self, *scopes: str, name: str | None = None) -> str:
        """A new token with `scopes`; without `name`, a fresh one (names are unique among active tokens)."""
        with write_transaction(self.engine) as session:
            plaintext, _ = create_token(session=session, name=name or f"test-{next(TOKEN_NUMBERS)}", scopes=list(scopes))
        return plaintext

    def client(self, *scopes: str, name: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token(*scopes, name=name)}"} if scopes else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def on_loopback(app: Any, *, lifespan: Literal["on", "off"] = "on") -> Iterator[int]:
    """`app` (any ASGI app) served by a real uvicorn in a thread on a free loopback port for the
    block; yields the port."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan=lifespan))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serve(app: FastAPI, engine: Engine, settings: Settings) -> Iterator[LiveServer]:
    """`app` served by a real uvicorn on a free loopback port for the block."""
    with on_loopback(app) as port:
        yield LiveServer(url=f"http://127.0.0.1:{port}", engine=engine, settings=settings)


@pytest.fixture
def live_server(app: FastAPI, engine: Engine, settings: Settings) -> Iterator[LiveServer]:
    """The app served by a real uvicorn on a free loopback port, for the duration of one test."""
    with serve(app, engine, settings) as server:
        yield server


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """Everything logged during the test, as the service writes it (JSON lines, masked); the
    previous handlers come back afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    configure_logging("DEBUG", json_format=True, stream=stream)
    yield stream
    root.handlers, root.level = saved[0], saved[1]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data`, which every developer and CI have beside the project."""
    if not SHARED_DATA.is_dir():
        raise RuntimeError(f"{SHARED_DATA} is missing: the real-data tests need ../shared/data beside the project")
    return SHARED_DATA
