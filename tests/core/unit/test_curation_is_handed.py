"""Curation is handed the clock, the environment and its transaction (docs/layout.md,
`curation/__init__.py`): no curation module reads the time or the process environment itself,
commits, rolls back or opens a connection. import-linter sees imports, not calls, so this reads
each module's syntax tree for them:

- the environment: `os.environ`, `os.getenv`, `os.putenv`, `os.unsetenv`;
- the clock: `datetime.now`, `datetime.utcnow`, `datetime.today`, `date.today`, `time.time`,
  `time.monotonic`, `time.perf_counter`, `time.process_time` (and their `_ns` forms), and
  `schemas.common.utcnow`, whether called, passed on or imported by name;
- the transaction: a call of `.commit()` or `.rollback()`, and a connection or session of its
  own (`.connect()`, `create_engine`, `Session(...)`), except in `OWN_SNAPSHOT`.

The service hands curation a `now`, a `curation.clock.Clock` or a timer instead, and the session.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ENVIRONMENT = {"environ", "getenv", "putenv", "unsetenv"}
TIME_READS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time", "process_time_ns"}
DATE_READS = {"now", "utcnow", "today"}
FORBIDDEN_NAMES = {("os", name) for name in ENVIRONMENT} | {("time", name) for name in TIME_READS} | {("schemas.common", "utcnow")}
TRANSACTION = {"commit", "rollback"}
CONNECTING = {"connect", "create_engine", "Session"}
# The per-process copies of near groups and eval memberships read one snapshot through a connection
# of their own, from the engine they are handed (a request's session may hold an older one).
OWN_SNAPSHOT = {"curation/releases/group_cache.py"}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _reads(tree: ast.AST) -> list[str]:
    """Where `tree` reads the clock or the environment, as `line: what`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = _dotted(node.value).rsplit(".", 1)[-1]
            if (owner == "os" and node.attr in ENVIRONMENT) or (owner == "time" and node.attr in TIME_READS) or (owner in ("datetime", "date") and node.attr in DATE_READS):
                found.append(f"{node.lineno}: {_dotted(node)}")
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.extend(f"{node.lineno}: from {node.module} import {alias.name}" for alias in node.names if (node.module, alias.name) in FORBIDDEN_NAMES)
        elif isinstance(node, ast.Name) and node.id == "utcnow":
            found.append(f"{node.lineno}: utcnow")
    return found


def test_the_scan_finds_what_it_forbids() -> None:
    lines = ["import os, time", "from datetime import datetime", "from schemas.common import utcnow"]
    lines += ["os.environ['A']", "os.getenv('A')", "time.perf_counter()", "datetime.now()", "f(clock=time.time)"]
    sample = "\n".join(lines)
    assert [line.split(": ", 1)[1] for line in _reads(ast.parse(sample))] == [
        "from schemas.common import utcnow",
        "os.environ",
        "os.getenv",
        "time.perf_counter",
        "datetime.now",
        "time.time",
    ]


def _transactions(tree: ast.AST, *, own_snapshot: bool) -> list[str]:
    """Where `tree` commits, rolls back, or opens a connection or session of its own, as `line: what`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(node.func, ast.Name) else ""
            if name in TRANSACTION or (name in CONNECTING and not own_snapshot):
                found.append(f"{node.lineno}: {name}()")
    return found


def _modules() -> list[tuple[str, ast.AST]]:
    return [(str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8"))) for path in sorted((ROOT / "curation").rglob("*.py"))]


def test_curation_reads_neither_the_clock_nor_the_environment() -> None:
    offending = {name: reads for name, tree in _modules() if (reads := _reads(tree))}
    assert offending == {}, "curation is handed the time and the environment by its caller (curation.clock)"


def test_curation_works_in_the_transaction_it_is_handed() -> None:
    offending = {name: calls for name, tree in _modules() if (calls := _transactions(tree, own_snapshot=name in OWN_SNAPSHOT))}
    assert offending == {}, "the service opens, commits and rolls back curation's transaction"
    sample = ast.parse("\n".join(["session.commit()", "writer.rollback()", "engine.connect()", "Session(engine)", "session.begin_nested()", "session.flush()"]))
    assert _transactions(sample, own_snapshot=False) == ["1: commit()", "2: rollback()", "3: connect()", "4: Session()"]
