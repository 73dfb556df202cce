"""One way an item leaves the service (`service.items.shaping`): a withheld item carries no content,
no content hash, no links and only the day of its dates; and no other module of the service builds
an item's API model itself."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

from schemas.item import Item
from service.items.shaping import ShownItem

ROOT = Path(__file__).resolve().parents[3]
ITEM_MODELS = {"ItemRead", "ItemDetail"}
SHAPING = ROOT / "service" / "items" / "shaping.py"


def _item() -> Item:
    return Item(
        id=7,
        source_id=1,
        external_id="CVE-2024-0001",
        occurred_at=datetime(2024, 3, 5, 14, 37, 12, tzinfo=UTC),
        ingested_at=datetime(2024, 3, 6, 9, 1, tzinfo=UTC),
        title="Heap overflow in the parser",
        input="A crafted header overflows the parser's heap buffer.",
        reference="Patch the length check.",
        tags=["parser"],
        meta={"url": "https://issues.example.test/1"},
        content_hash="ab" * 32,
        record_digest="cd" * 32,
        duplicate_of=3,
        status="unique",
    )


def test_a_withheld_item_keeps_only_its_id_source_status_and_day() -> None:
    shown = ShownItem.of(_item(), "kev", sealed=True, withheld=True)
    read = shown.read()
    assert (read.id, read.source, read.status, read.sealed) == (7, "kev", "unique", True)
    assert (read.external_id, read.title, read.input, read.reference, read.metadata, read.tags, read.content_hash) == ("", "", "", "", {}, [], "")
    assert read.occurred_at is None and read.ingested_at is None
    assert shown.occurred_at == datetime(2024, 3, 5, tzinfo=UTC)
    assert shown.ingested_at == datetime(2024, 3, 6, tzinfo=UTC)
    assert shown.duplicate_of is None and shown.meta == {}
    assert "Heap" not in repr(shown) and "CVE-2024-0001" not in repr(shown)


def test_a_sealed_item_in_an_open_window_and_a_dev_item_are_shown_whole() -> None:
    for sealed in (True, False):
        read = ShownItem.of(_item(), "kev", sealed=sealed, withheld=False).read()
        assert read.title == "Heap overflow in the parser" and read.metadata == {"url": "https://issues.example.test/1"}
        assert read.occurred_at == datetime(2024, 3, 5, 14, 37, 12, tzinfo=UTC) and not read.sealed
    # `withheld` means nothing for an item no eval seals.
    assert not ShownItem.of(_item(), "kev", sealed=False, withheld=True).withheld


def test_no_module_but_shaping_builds_an_item_answer() -> None:
    builders = []
    for path in sorted((ROOT / "service").rglob("*.py")):
        if path == SHAPING or "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            called = node.func
            name = called.id if isinstance(called, ast.Name) else called.value.id if isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name) else ""
            direct = name in ITEM_MODELS and (isinstance(called, ast.Name) or (isinstance(called, ast.Attribute) and called.attr in ("model_validate", "model_construct")))
            via_helper = any(isinstance(arg, ast.Name) and arg.id in ITEM_MODELS for arg in node.args)
            if (direct and name != "ItemDetail") or via_helper:
                builders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert builders == [], "build item answers with service.items.shaping (ShownItem.read), not by hand"
