"""Every audit action is named once: an item's moves in `schemas.lifecycle.ItemAction`, the rest
in `schemas.audit.AuditAction`. No module of ours spells an action as a string or builds one from
parts, so a reader filtering the audit log by action finds every event of a kind."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from schemas.audit import AuditAction
from schemas.lifecycle import ItemAction

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("schemas", "ingest", "curation", "embedding", "service")
HOMES = {ROOT / "schemas" / "audit.py", ROOT / "schemas" / "lifecycle.py"}
ACTION = re.compile(r"^(item|items|release|run|eval|source|token|ui|probe|corpus|dedup|model|endpoint|review)\.[a-z_]+$")
KNOWN = {action.value for action in AuditAction} | {action.value for action in ItemAction}


def _spelled(path: Path) -> list[str]:
    """Known actions written as strings, and any `action=` given a string or an f-string."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and node.value in KNOWN:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
        elif isinstance(node, ast.keyword) and node.arg == "action" and isinstance(node.value, ast.Constant | ast.JoinedStr):
            found.append(f"{path.relative_to(ROOT)}:{node.value.lineno} action={ast.unparse(node.value)}")
    return found


def test_no_module_spells_an_audit_action() -> None:
    modules = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts and path not in HOMES]
    assert len(modules) > 200
    spelled = [entry for path in modules for entry in _spelled(path)]
    assert not spelled, "\n".join(spelled)


def test_actions_are_unique_and_sealed_ones_say_so() -> None:
    values = [action.value for action in AuditAction] + [action.value for action in ItemAction]
    assert len(values) == len(set(values))
    assert all(ACTION.match(value) for value in values)
    assert {action for action in AuditAction if "sealed" in action.value} >= {AuditAction.RELEASE_SEALED_READ, AuditAction.RUN_SEALED_START, AuditAction.ITEM_SEALED_READ}
