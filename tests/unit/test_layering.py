"""The flow's import rules from DESIGN.md: schemas import nothing of ours; ingest and curation never
import the service layer or the web framework."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "schemas": {"ingest", "curation", "service", "fastapi", "starlette", "uvicorn"},
    "ingest": {"curation", "service", "fastapi", "starlette", "uvicorn"},
    "curation": {"service", "fastapi", "starlette", "uvicorn"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_respects_the_flow(package: str) -> None:
    offending = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
        if _imports(path) & FORBIDDEN[package]
    }
    assert offending == {}
