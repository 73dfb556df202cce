"""Database engine, sessions and migrations. SQLite (WAL) by default, PostgreSQL by URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, create_engine

MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
MIGRATION_LOCK_ID = 0x601D5E7
IMMEDIATE_OPTION = "goldenset_sqlite_immediate"


def normalise_database_url(url: str) -> str:
    """Make a plain `postgresql://` URL use psycopg 3, the driver goldenset ships with."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def _configure_sqlite(engine: Engine) -> None:
    # pysqlite's own transaction handling breaks SAVEPOINT; let SQLAlchemy emit BEGIN itself.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(IMMEDIATE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def make_engine(url: str, *, pool_size: int = 10, max_overflow: int = 10, pool_timeout: float = 30.0) -> Engine:
    """An engine for `url`. For a file-backed SQLite URL the parent folder is created.

    PostgreSQL connections are pooled: `pool_size` kept open, up to `max_overflow` more when busy,
    and a checkout that finds none free within `pool_timeout` seconds raises
    `sqlalchemy.exc.TimeoutError` (the service answers it 503 with Retry-After). SQLite's are
    pooled the same way.

    The engine never renders bound parameters into its exceptions or logs: they hold item titles,
    inputs and references, and an error's traceback goes to the logs."""
    url = normalise_database_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        pooling: dict[str, Any] = {} if database in ("", ":memory:") else {"pool_size": pool_size, "max_overflow": max_overflow, "pool_timeout": pool_timeout}
        engine = create_engine(url, hide_parameters=True, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **pooling)
        _configure_sqlite(engine)
        return engine
    return create_engine(url, hide_parameters=True, pool_pre_ping=True, pool_size=pool_size, max_overflow=max_overflow, pool_timeout=pool_timeout)


def writer_engine(engine: Engine) -> Engine:
    """`engine` for transactions that read and then write.

    On SQLite such a transaction must take the write lock when it begins (BEGIN IMMEDIATE): one
    that read first cannot wait for the lock later and fails with "database is locked" when
    another process writes. PostgreSQL ignores the option.
    """
    return engine.execution_options(**{IMMEDIATE_OPTION: True})


def write_session(engine: Engine) -> Session:
    """A session whose transactions may read and then write safely beside other writers."""
    return Session(writer_engine(engine), expire_on_commit=False)


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Session]:
    """A `write_session` whose transaction commits when the block ends and rolls back when it
    raises: one unit of work, for callers that hand a session to code that never commits."""
    with write_session(engine) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    return config


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` (default: the newest). Safe to call on an up-to-date database,
    and from several processes at once on PostgreSQL (they take turns)."""
    config = alembic_config(engine)
    with writer_engine(engine).begin() as connection:
        if connection.dialect.name == "postgresql":
            # Several replicas starting at once must not run the same migration concurrently.
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_ID})")
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
