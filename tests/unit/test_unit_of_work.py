"""The API's routes hold no transaction handling of their own: the request's session is one unit
of work (`service.core.deps`: committed when the route returns, rolled back when it raises) and a
domain refusal (`curation.refusals.Refused`) is answered by one handler (`service.core.problems`).
So no API route module commits, rolls back, or catches a refusal to translate it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROUTES = sorted(path for path in (ROOT / "service").glob("*/routes.py") if path.parent.name != "ui")


def _offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("commit", "rollback"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {node.func.attr}()")
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            names = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            caught = [ast.unparse(name) for name in names]
            # A refusal is the handler's to answer; a background task may log one (it answers nobody).
            if any(name.endswith("Refused") for name in caught) and not _in_background(path, node):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} catches {', '.join(caught)}")
    return found


def _in_background(path: Path, handler: ast.ExceptHandler) -> bool:
    """Whether `handler` sits in a function run off the request (its name says so)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and "background" in node.name:
            lines = {child.lineno for child in ast.walk(node) if isinstance(child, ast.ExceptHandler)}
            if handler.lineno in lines:
                return True
    return False


def test_the_api_routes_leave_transactions_and_refusals_to_the_unit_of_work() -> None:
    assert len(ROUTES) >= 7, ROUTES
    offences = [offence for path in ROUTES for offence in _offences(path)]
    assert not offences, "\n".join(offences)
