"""Fixtures the evidence end-to-end tests share."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.release import ReleaseItem
from tests.run_support import released_eval


@pytest.fixture
def private_eval(engine: Engine) -> dict[str, Any]:
    """A released eval of 60 KEV items of early 2024 with a 30% sealed slice, and each item's released input."""
    released = released_eval(engine, count=60, sealed_fraction=0.3)
    with Session(engine) as session:
        rows = session.exec(select(ReleaseItem).where(ReleaseItem.release_id == released.release.id)).all()
        texts = {row.item_id: json.loads(row.content)["input"] for row in rows}
    return {"dev": released.dev, "sealed": released.sealed, "texts": texts}
