"""The runnable examples of the README and of the documentation site's pages, copied as written:
every fenced block marked `<!-- runnable -->` runs, document by document (the README first, then
the pages in mkdocs.yml's nav order), each document in a fresh bash with `set -euo pipefail` (its
shell blocks in order, its Python blocks with this interpreter between them), against one live
server holding the `make run` eval (`cisa-kev-sample`), from a folder that has the repository's
`.venv` and `examples` as `make run` users have them.

The examples name the service by `$PORT` alone, as a reader changes it: the test sets `PORT` to the
live server's port and changes no text. (Not GOLDENSET_URL: with it set, the command line works
over the API, and the examples make their tokens where the database is before they set it.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from sqlalchemy.engine import Engine

from tests.conftest import REPO_ROOT, TEST_SECRET_KEY, LiveServer
from tests.run_support import released_eval

MARK = "<!-- runnable -->"
BLOCK = re.compile(re.escape(MARK) + r"\n```(sh|python)\n(.*?)```", re.DOTALL)
HARD_CODED_PORT = re.compile(r"(127\.0\.0\.1|localhost):\d+")


def documents() -> list[Path]:
    """The README, then every page of the site in mkdocs.yml's nav order."""
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def files(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [name for entry in nav for name in files(entry)]
        if isinstance(nav, dict):
            return [name for value in nav.values() for name in files(value)]
        return []

    return [REPO_ROOT / "README.md", *(REPO_ROOT / config["docs_dir"] / name for name in files(config["nav"]))]


def runnable_blocks(path: Path) -> list[tuple[str, str]]:
    """A document's runnable blocks, in order: (language, code)."""
    return [(language, code) for language, code in BLOCK.findall(path.read_text(encoding="utf-8"))]


def runnable_documents() -> list[tuple[Path, list[tuple[str, str]]]]:
    return [(path, blocks) for path in documents() if (blocks := runnable_blocks(path))]


def test_the_readme_marks_blocks_of_each_kind_and_the_docs_theirs() -> None:
    assert {language for language, _ in runnable_blocks(REPO_ROOT / "README.md")} == {"sh", "python"}
    assert len(runnable_documents()) >= 2, "the docs' pages have runnable blocks of their own"
    for path in documents():
        marks = sum(line == MARK for line in path.read_text(encoding="utf-8").splitlines())
        assert marks == len(runnable_blocks(path)), f"{path.name}: a {MARK} line not followed by a ```sh or ```python block"


def test_no_runnable_block_names_a_port_but_through_port() -> None:
    for path, blocks in runnable_documents():
        for _, code in blocks:
            assert not HARD_CODED_PORT.search(code), f"{path.name}: a runnable block names its port; use $PORT or $GOLDENSET_URL"


def test_the_runnable_examples_run_as_written(live_server: LiveServer, engine: Engine, database_url: str, tmp_path: Path) -> None:
    released_eval(engine, count=30, name="cisa-kev-sample", sealed_fraction=0.2)
    for name in (".venv", "examples"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    port = urlsplit(live_server.url).port
    assert port is not None and live_server.url == f"http://127.0.0.1:{port}"
    env = {key: value for key, value in os.environ.items() if not key.startswith("GOLDENSET_")}
    env |= {"GOLDENSET_DATABASE_URL": database_url, "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY, "GOLDENSET_ENV": "test", "HF_HUB_OFFLINE": "1", "PORT": str(port)}
    env |= {"HF_DATASETS_CACHE": str(tmp_path / "hf-cache"), "HF_HOME": str(tmp_path / "hf-home")}
    output = ""
    for path, blocks in runnable_documents():
        shell = ["set -euo pipefail"]
        for number, (language, code) in enumerate(blocks):
            if language == "sh":
                shell.append(code)
                continue
            script = tmp_path / f"{path.stem}_block_{number}.py"
            script.write_text(code, encoding="utf-8")
            shell.append(f"{sys.executable} {script}")
        done = subprocess.run(["bash", "-c", "\n".join(shell)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, f"{path.relative_to(REPO_ROOT)}:\n" + done.stdout[-3000:] + done.stderr[-3000:]
        output += done.stdout
    assert "rows, each with the canary GOLDENSET CANARY GUID" in output
    assert len(re.findall(r"run \d+: mean score", output)) >= 2, output[-2000:]
