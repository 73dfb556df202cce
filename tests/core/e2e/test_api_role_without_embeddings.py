"""The API role without the `embeddings` extra (docs/getting-started.md, "Install"): an API replica builds its app,
answers health, release pages, the review queue and review decisions without importing PyTorch,
sentence-transformers, ONNX Runtime, OpenVINO or faiss; and where the model is needed, an install
without the extra says so in one line (a command: exit status 2; a request: a 503 problem).

Each case runs in a fresh interpreter, so what the test process itself imported does not count. The
second makes the extra's modules unimportable (`NOT_INSTALLED`), as in `pip install goldenset`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from ingest.mapping import load_mapping
from service.core.db import make_engine, migrate
from service.core.embedding_extra import EMBEDDING_MODULES
from tests.conftest import REPO_ROOT, TEST_SECRET_KEY
from tests.dedup_support import KEV_MAPPING, ingest
from tests.eval_support import ingest_and_curate, kev_records
from tests.run_support import released_eval, token

HEAVY = ("torch", "sentence_transformers", "transformers", "onnx", "onnxruntime", "openvino", "nncf", "faiss")

NOT_INSTALLED = f"""
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {sorted(EMBEDDING_MODULES)!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, NotInstalled())
"""

API_REPLICA = """
import json, sys
from fastapi.testclient import TestClient
from service.app import create_app
from service.core.sessions import LOGIN_CSRF_COOKIE
from service.core.settings import Settings

settings = Settings(env="test", database_url=sys.argv[1], secret_key=sys.argv[2], log_json=False, curate_after_ingest=False)
bearer = {"Authorization": f"Bearer {sys.argv[3]}"}
answers = {}
with TestClient(create_app(settings, role="api")) as client:
    for path in ("/healthz", "/v1/evals/ops/releases/latest", "/v1/evals/ops/review-queue"):
        answers[path] = client.get(path, headers=bearer).status_code
    answers["approve"] = client.post(f"/v1/items/{sys.argv[4]}/approve", headers=bearer).status_code
    form = client.get("/ui/login")
    client.post("/ui/login", data={"token": sys.argv[3], "csrf": form.cookies[LOGIN_CSRF_COOKIE], "next": "/ui"})
    for path in ("/ui/evals/ops/releases/1", "/ui/evals/ops/review", f"/ui/items/{sys.argv[4]}"):
        answers[path] = client.get(path).status_code
    similar = client.get(f"/v1/items/{sys.argv[4]}/similar", headers=bearer)
    answers["similar"] = [similar.status_code, similar.json().get("detail", "") if similar.status_code != 200 else ""]
print(json.dumps({"answers": answers, "loaded": sorted(name for name in sys.modules if name.partition(".")[0] in %r)}))
"""


def _python(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, **(env or {})}, timeout=180)


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    """One migrated SQLite database: what is imported does not depend on the database."""
    engine = make_engine(f"sqlite:///{tmp_path / 'goldenset.db'}")
    migrate(engine)
    yield engine
    engine.dispose()


def _replica(engine: Engine, released_item: int, *, without_extra: bool) -> dict[str, Any]:
    url = engine.url.render_as_string(hide_password=False)
    script = (NOT_INSTALLED if without_extra else "") + API_REPLICA % (HEAVY,)
    ran = _python(script, url, TEST_SECRET_KEY, token(engine, "read", "curate", "sealed"), str(released_item))
    assert ran.returncode == 0, ran.stderr[-3000:]
    result: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def test_an_api_replica_answers_without_importing_the_embedding_stack_and_without_it_installed(sqlite_engine: Engine) -> None:
    released = released_eval(sqlite_engine)
    installed = _replica(sqlite_engine, released.dev[0], without_extra=False)
    assert installed["loaded"] == []
    assert {path: status for path, status in installed["answers"].items() if path != "similar" and status != 200} == {}

    absent = _replica(sqlite_engine, released.dev[1], without_extra=True)["answers"]
    assert {path: status for path, status in absent.items() if path != "similar" and status != 200} == {}
    status, detail = absent["similar"]
    assert status == 503 and "goldenset[embeddings]" in detail, detail


def test_without_the_extra_a_command_that_needs_the_model_ends_with_one_line(sqlite_engine: Engine) -> None:
    engine = sqlite_engine
    ingest_and_curate(engine, "kev", kev_records(since="2024-01-01", until="2024-02-01")[:5])
    mapping = load_mapping(KEV_MAPPING).model_copy(update={"format": "jsonl", "records": None})
    ingest(engine, "kev", kev_records(since="2024-02-01", until="2024-03-01")[:3], mapping)  # left pending
    env = {"GOLDENSET_DATABASE_URL": engine.url.render_as_string(hide_password=False), "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY, "GOLDENSET_ENV": "test"}
    for command in (["curate"], ["serve", "--port", "9"], ["scheduler"]):
        ran = _python(NOT_INSTALLED + "import sys\nfrom service.cli import run\nsys.argv = ['goldenset', *sys.argv[1:]]\nrun()\n", *command, env=env)
        assert ran.returncode == 2, (command, ran.stderr[-3000:])
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and "goldenset[embeddings]" in lines[0] and "Traceback" not in ran.stderr, (command, ran.stderr[-3000:])
