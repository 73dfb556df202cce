"""The client distribution on its own: `pip install clients/python` into a clean virtual
environment is quick and pulls no PyTorch, and with nothing else installed the client lists a
live server's evals and the example eval pipeline runs end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy.engine import Engine

from tests.conftest import REPO_ROOT, LiveServer
from tests.run_support import released_eval

INSTALL_SECONDS = 60


def test_the_client_installs_alone_and_talks_to_a_live_server(live_server: LiveServer, engine: Engine, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    started = time.monotonic()
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(REPO_ROOT / "clients" / "python")], capture_output=True, text=True, timeout=300
    )
    seconds = time.monotonic() - started
    assert installed.returncode == 0, installed.stderr
    print(f"pip install clients/python: {seconds:.1f} s")
    assert seconds < INSTALL_SECONDS

    packages = subprocess.run([python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True).stdout.lower()
    assert "goldenset-client==0.1.0" in packages and "torch" not in packages and "goldenset==" not in packages

    released = released_eval(engine)
    # Run from an empty folder, so neither the repository's packages nor its tests can be imported.
    env = {"PATH": os.environ.get("PATH", ""), "GOLDENSET_URL": live_server.url, "GOLDENSET_TOKEN": live_server.token("read", name="installed")}
    script = "import goldenset_client\nwith goldenset_client.Client.from_env() as client:\n    print([e.name for e in client.list_evals()])"
    listed = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "['ops']"
    isolated = subprocess.run([python, "-c", "import schemas"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert "No module named 'schemas'" in isolated.stderr

    admin = live_server.token("admin", name="setup")
    example = str(REPO_ROOT / "examples" / "eval_pipeline.py")
    ran = subprocess.run(
        [python, example, "--url", live_server.url, "--token", admin, "--eval", "ops", "--setup"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert f"{len(released.dev)} dev items of ops release 1" in ran.stdout and "mean score" in ran.stdout
