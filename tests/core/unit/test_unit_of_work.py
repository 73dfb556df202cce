"""One unit of work, answered in one place. A request's session commits when its route returns and
rolls back when it raises (`service.core.deps`); batch and background work opens one with
`service.core.db.write_transaction` (or is handed such a factory, in `ingest`); a domain refusal
(`curation.refusals.Refused`) is answered by one handler for the API (`service.core.problems`) and
one for commands (`service.cli`). So no module of the service or of ingest commits or rolls back
outside those helpers and migrations, and no route or command catches a refusal to translate it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
UNIT_OF_WORK = {Path("service/core/deps.py"), Path("service/core/db.py")}
"""The helpers that own transactions: nothing else may end one."""
REFUSAL_HANDLERS = {Path("service/cli.py")}
"""The commands' one handler of refusals (the API's is an exception handler, caught by no `except`)."""
MODULES = sorted(path for package in ("service", "ingest") for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts)


def _answers_people(path: Path) -> bool:
    """Routes (API and web pages) and commands: the modules whose refusals the shared handlers answer."""
    relative = path.relative_to(ROOT)
    if relative in REFUSAL_HANDLERS:
        return False
    return relative.name == "routes.py" or relative.parts[:2] == ("service", "ui") or relative.name == "cli.py" or relative.name.endswith("_cli.py")


def _transaction_calls(path: Path, tree: ast.AST) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} calls {node.func.attr}()"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("commit", "rollback")
    ]


def _caught_refusals(path: Path, tree: ast.AST) -> list[str]:
    """Every `except` naming a refusal, but in a function run off the request (its name says it
    is background work): that one answers nobody, so it may log what stopped it."""
    background = {id(handler) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and "background" in node.name for handler in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None and id(node) not in background:
            names = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            caught = [ast.unparse(name) for name in names]
            if any(name.endswith("Refused") for name in caught):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} catches {', '.join(caught)}")
    return found


def test_only_the_unit_of_work_helpers_end_a_transaction() -> None:
    assert len(MODULES) > 100, len(MODULES)
    offences = [
        offence
        for path in MODULES
        if path.relative_to(ROOT) not in UNIT_OF_WORK
        for offence in _transaction_calls(path, ast.parse(path.read_text(), filename=str(path)))
    ]
    assert not offences, "\n".join(offences)


def test_routes_and_commands_leave_refusals_to_the_shared_handlers() -> None:
    answering = [path for path in MODULES if _answers_people(path)]
    assert len(answering) >= 20, answering
    offences = [offence for path in answering for offence in _caught_refusals(path, ast.parse(path.read_text(), filename=str(path)))]
    assert not offences, "\n".join(offences)


def test_the_checks_see_what_they_look_for() -> None:
    """The scans find a commit and a caught refusal when there is one (so they cannot pass by
    looking at nothing)."""
    sample = ast.parse("try:\n    session.commit()\nexcept (KeyError, ReviewRefused):\n    pass\n")
    assert _transaction_calls(ROOT / "service/x.py", sample) == ["service/x.py:2 calls commit()"]
    assert _caught_refusals(ROOT / "service/x.py", sample) == ["service/x.py:3 catches KeyError, ReviewRefused"]
    logged = ast.parse("def pull_in_background():\n    try:\n        pull()\n    except PullRefused:\n        log()\n")
    assert _caught_refusals(ROOT / "service/x.py", logged) == []
