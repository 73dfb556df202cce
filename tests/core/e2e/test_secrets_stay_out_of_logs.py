"""Attacks on what the logs and a failed start reveal: a refused production start never echoes the
admin token, a database error while storing an item logs no item text (SQL parameters, PostgreSQL's
DETAIL and a data error's quoted value are all withheld), and the development secret key is
warned about when a process starts with it."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine, ExceptionContext
from sqlalchemy.exc import IntegrityError, PendingRollbackError
from sqlmodel import Session, select

from schemas.common import utcnow
from schemas.token import ApiToken
from service.core.db import write_transaction
from service.core.tokens import create_token
from tests.conftest import LiveServer, _free_port

GOLDENSET = [sys.executable, "-m", "service.cli"]
SHORT_ADMIN_TOKEN = "adm-Qv7Zk-tail9"
GOOD_SECRET_KEY = "k7" * 24
# Distinctive words of one stored item: none of them may reach a log line.
ITEM = {
    "external_id": "ext-Pb93",
    "occurred_at": "2025-03-01T10:00:00Z",
    "title": "Zephyr-Qx81 checkout outage",
    "input": "customer Wv27 saw card declines after deploy",
    "reference": "rolled back release Jk55",
}
ITEM_FRAGMENTS = ("Pb93", "Zephyr", "Qx81", "Wv27", "Jk55", "card declines")


def _clean_env(tmp_path: Path, **variables: str) -> dict[str, str]:
    """The test's environment without any GOLDENSET_* variable, plus `variables`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GOLDENSET_")}
    return {**env, "GOLDENSET_DATABASE_URL": f"sqlite:///{tmp_path / 'goldenset.db'}", "COLUMNS": "80", **variables}


def _fragments(secret: str, size: int = 4) -> set[str]:
    return {secret[start : start + size] for start in range(len(secret) - size + 1)}


@pytest.mark.parametrize("command", [["serve", "--no-scheduler", "--port", "0"], ["migrate"], ["scheduler"]])
def test_a_refused_production_start_says_what_to_fix_in_one_line_and_never_echoes_the_token(command: list[str], tmp_path: Path) -> None:
    # cwd: an empty folder, so that no ./.env adds settings.
    env = _clean_env(tmp_path, GOLDENSET_ENV="production", GOLDENSET_ADMIN_TOKEN=SHORT_ADMIN_TOKEN)
    result = subprocess.run([*GOLDENSET, *command], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert not _fragments(SHORT_ADMIN_TOKEN) & {output[start : start + 4] for start in range(len(output))}, output
    assert "Traceback" not in output and "input_value" not in output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and result.stdout == "", output
    assert lines[0].startswith("error: GOLDENSET_SECRET_KEY must be set") and "GOLDENSET_ADMIN_TOKEN must be at least 32" in lines[0]
    assert "secrets.token_urlsafe" in lines[0] and lines[0].endswith("goldenset did not start")
    assert not (tmp_path / "goldenset.db").exists()  # refused before anything was touched


def test_a_refused_setting_is_named_without_its_value(tmp_path: Path) -> None:
    env = _clean_env(tmp_path, GOLDENSET_SECRET_KEY=GOOD_SECRET_KEY, GOLDENSET_ADMIN_TOKEN=SHORT_ADMIN_TOKEN, GOLDENSET_MAX_BODY_BYTES="tail9-Qv7Zk")
    result = subprocess.run([*GOLDENSET, "migrate"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("error: GOLDENSET_MAX_BODY_BYTES: Input should be a valid integer")
    assert "Qv7Zk" not in result.stderr and "tail9" not in result.stderr


def _refuse_marked_items(engine: Engine) -> None:
    """Make the database fail inside the INSERT of an item whose title holds 'Zephyr', and make the
    service's engine take that failure for a lost connection: ingest rejects a record the database
    refuses, but a lost connection ends the request, which is answered 503 and logged."""
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            # The cast fails with a DataError whose message quotes the title, and whose CONTEXT quotes the statement.
            connection.execute(
                text(
                    "CREATE FUNCTION refuse_marked_items() RETURNS trigger LANGUAGE plpgsql AS $$ "
                    "BEGIN IF NEW.title LIKE '%Zephyr%' THEN PERFORM NEW.title::integer; END IF; RETURN NEW; END $$"
                )
            )
            connection.execute(text("CREATE TRIGGER refuse_marked_items BEFORE INSERT ON item FOR EACH ROW EXECUTE FUNCTION refuse_marked_items()"))
        else:
            connection.execute(text("CREATE TRIGGER refuse_marked_items BEFORE INSERT ON item WHEN NEW.title LIKE '%Zephyr%' BEGIN SELECT json(NEW.title); END"))

    @event.listens_for(engine, "handle_error")
    def _as_if_the_connection_dropped(context: ExceptionContext) -> None:
        if context.statement is not None and context.statement.startswith("INSERT INTO item "):
            context.is_disconnect = True


def test_a_database_error_while_storing_an_item_logs_no_item_text(live_server: LiveServer, log_stream: io.StringIO) -> None:
    _refuse_marked_items(live_server.engine)
    with live_server.client("admin") as client:
        assert client.post("/v1/sources", json={"name": "ops"}).status_code == 201
        answer = client.post("/v1/sources/ops/items", json=[ITEM])
    # A lost connection during a write is answered 503 with Retry-After (service.core.disconnects):
    # the batch was stored whole or not at all, and sending it again is safe.
    assert answer.status_code == 503 and answer.headers["retry-after"], answer.text
    logged = log_stream.getvalue()
    assert "POST /v1/sources/ops/items: the database connection was lost" in logged
    assert ("DataError" if live_server.engine.dialect.name == "postgresql" else "OperationalError") in logged
    assert [fragment for fragment in ITEM_FRAGMENTS if fragment in logged + answer.text] == []


def test_integrity_errors_log_the_constraint_but_not_the_row(engine: Engine, log_stream: io.StringIO) -> None:
    """PostgreSQL writes the failing row or key into DETAIL, which hide_parameters does not cover;
    SQLAlchemy quotes the whole error again in the PendingRollbackError that follows."""
    with write_transaction(engine) as session:
        plaintext, token = create_token(session=session, name="pipeline-Rq42", scopes="read")
    log = logging.getLogger("goldenset.test")
    with engine.connect() as connection:
        with pytest.raises(IntegrityError) as missing_prefix:
            connection.execute(
                text("INSERT INTO api_token (name, token_hash, prefix, scopes, created_at) VALUES (:name, :hash, NULL, '[]', :created)"),
                {"name": "name-Mz38", "hash": "hash-Lw61", "created": utcnow()},
            )
        log.error("storing a token failed", exc_info=missing_prefix.value)
    # The engine itself never renders parameters (what a caller's str() or repr() of the error shows).
    statement_part = str(missing_prefix.value).split("[SQL: ", 1)[1]
    assert "[SQL parameters hidden due to hide_parameters=True]" in statement_part and "Mz38" not in statement_part and "Lw61" not in statement_part
    with Session(engine) as session:
        session.add(ApiToken(name="copy-Ty05", token_hash=token.token_hash, prefix="p", scopes=[]))
        with pytest.raises(IntegrityError) as duplicate:
            session.flush()
        log.error("storing a token failed", exc_info=duplicate.value)
        with pytest.raises(PendingRollbackError) as pending:
            session.exec(select(ApiToken)).all()
        log.error("reading after a failed flush failed", exc_info=pending.value)
    logged = log_stream.getvalue()
    assert "prefix" in logged and "api_token" in logged and "IntegrityError" in logged and "PendingRollbackError" in logged
    assert [value for value in ("Mz38", "Lw61", "Ty05", "Rq42", token.token_hash, plaintext) if value in logged] == []


@pytest.mark.parametrize(("command", "started"), [(["serve", "--no-scheduler"], "Application startup complete"), (["scheduler"], "scheduler started")])
def test_starting_with_the_development_key_warns_once(command: list[str], started: str, tmp_path: Path) -> None:
    env = _clean_env(tmp_path)  # no GOLDENSET_SECRET_KEY: the built-in development key
    port = ["--port", str(_free_port())] if command[0] == "serve" else []
    process = subprocess.Popen([*GOLDENSET, *command, *port], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path)
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    lines: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if started in line:
                break
    finally:
        process.terminate()
        process.wait(timeout=30)
        watchdog.cancel()
    warnings = [line for line in lines if "development secret key is in use" in line]
    assert any(started in line for line in lines), "".join(lines)
    assert len(warnings) == 1, "".join(lines)
    assert '"level": "WARNING"' in warnings[0] and "set GOLDENSET_SECRET_KEY" in warnings[0]
    assert lines.index(warnings[0]) < next(index for index, line in enumerate(lines) if started in line)


def test_a_real_secret_key_starts_without_the_warning(tmp_path: Path) -> None:
    env = _clean_env(tmp_path, GOLDENSET_SECRET_KEY=GOOD_SECRET_KEY)
    result = subprocess.run([*GOLDENSET, "migrate"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert result.returncode == 0 and "development secret key" not in result.stderr
