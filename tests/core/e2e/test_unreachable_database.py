"""A PostgreSQL database that refuses connections is one line naming it (password hidden) and exit
status 2, for a command and for `serve` alike, as a missing SQLite file is: never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

GOLDENSET = str(Path(sys.executable).parent / "goldenset")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens on it once the socket is closed


@pytest.mark.parametrize("command", [["eval", "list"], ["token", "list"], ["serve", "--port", "0", "--no-scheduler"]])
def test_a_database_that_refuses_connections_is_one_line_and_exit_2(command: list[str], tmp_path: Path) -> None:
    url = f"postgresql://goldenset:hunter2@127.0.0.1:{_closed_port()}/incidents"
    environment = {**os.environ, "GOLDENSET_DATABASE_URL": url, "GOLDENSET_LOG_JSON": "false", "GOLDENSET_ENV": "test", "COLUMNS": "400"}
    environment.pop("GOLDENSET_URL", None)
    done = subprocess.run([GOLDENSET, *command], env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot reach the database postgresql+psycopg://goldenset:***@127.0.0.1:" in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr + done.stdout
