"""The README's runnable examples, copied as written: every fenced block marked
`<!-- runnable -->` runs in order (shell blocks in one bash with `set -euo pipefail`, Python blocks
with this interpreter) against a live server holding the `make run` eval (`cisa-kev-sample`), from
a folder that has the repository's `.venv` and `examples` as `make run` users have them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import Engine

from tests.conftest import REPO_ROOT, TEST_SECRET_KEY, LiveServer
from tests.run_support import released_eval

BLOCK = re.compile(r"<!-- runnable -->\n```(sh|python)\n(.*?)```", re.DOTALL)
README_URL = "http://127.0.0.1:8000"


def runnable_blocks() -> list[tuple[str, str]]:
    """The README's runnable blocks, in order: (language, code)."""
    return [(language, code) for language, code in BLOCK.findall((REPO_ROOT / "README.md").read_text(encoding="utf-8"))]


def test_the_readme_marks_blocks_of_each_kind() -> None:
    assert {language for language, _ in runnable_blocks()} == {"sh", "python"}


def test_the_readmes_runnable_examples_run_as_written(live_server: LiveServer, engine: Engine, database_url: str, tmp_path: Path) -> None:
    released_eval(engine, count=30, name="cisa-kev-sample", sealed_fraction=0.2)
    for name in (".venv", "examples"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    env = {key: value for key, value in os.environ.items() if not key.startswith("GOLDENSET_")}
    env |= {"GOLDENSET_DATABASE_URL": database_url, "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY, "GOLDENSET_ENV": "test", "HF_HUB_OFFLINE": "1"}
    env |= {"HF_DATASETS_CACHE": str(tmp_path / "hf-cache"), "HF_HOME": str(tmp_path / "hf-home")}
    shell = ["set -euo pipefail"]
    for number, (language, code) in enumerate(runnable_blocks()):
        code = code.replace(README_URL, live_server.url)
        if language == "sh":
            shell.append(code)
            continue
        script = tmp_path / f"block_{number}.py"
        script.write_text(code, encoding="utf-8")
        shell.append(f"{sys.executable} {script}")
    done = subprocess.run(["bash", "-c", "\n".join(shell)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rows, each with the canary GOLDENSET CANARY GUID" in done.stdout
    assert re.search(r"run \d+: mean score", done.stdout), done.stdout[-2000:]
