"""Alembic owns the schema: the migrations produce exactly the tables the models declare."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine, make_url
from sqlmodel import SQLModel

import schemas  # noqa: F401  (registers every table)
from service.core.db import alembic_config, make_engine, migrate, write_transaction
from service.core.tokens import create_token


def test_migrations_match_the_models(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, SQLModel.metadata)
    assert differences == []


def test_migrate_is_idempotent(engine: Engine) -> None:
    """Migrating a database at the newest revision again changes nothing: same revision, same
    tables and columns, the rows kept."""

    def state() -> tuple[str, dict[str, list[str]], int]:
        with engine.connect() as connection:
            revision = connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
            inspector = inspect(connection)
            tables = {name: sorted(column["name"] for column in inspector.get_columns(name)) for name in sorted(inspector.get_table_names())}
            tokens = connection.execute(text("SELECT count(*) FROM api_token")).scalar_one()
        return revision, tables, tokens

    with write_transaction(engine) as session:
        create_token(session=session, name="kept", scopes=["read"])
    before = state()
    assert before[0] == ScriptDirectory.from_config(alembic_config(engine)).get_current_head() and before[2] == 1
    migrate(engine)
    migrate(engine)
    assert state() == before


def test_replicas_migrating_an_empty_database_at_once_take_turns(database_url: str, tmp_path: Path) -> None:
    """Three processes migrate the same empty database concurrently; all succeed, schema is whole."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        empty_url = f"sqlite:///{tmp_path / 'empty.db'}"
        cleanup = None
    else:
        name = f"{url.database}_empty"
        with psycopg.connect(host=url.host, port=url.port or 5432, user=url.username, dbname=url.database, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        empty_url = url.set(database=name).render_as_string(hide_password=False)
        cleanup = name
    code = "import sys; from service.core.db import make_engine, migrate; migrate(make_engine(sys.argv[1]))"
    processes = [subprocess.Popen([sys.executable, "-c", code, empty_url], stderr=subprocess.PIPE, text=True) for _ in range(3)]
    errors = [process.communicate(timeout=120)[1] for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], errors
    engine = make_engine(empty_url)
    try:
        test_migrations_match_the_models(engine)
    finally:
        engine.dispose()
        if cleanup:
            with psycopg.connect(host=url.host, port=url.port or 5432, user=url.username, dbname=url.database, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{cleanup}" WITH (FORCE)')
