"""near links between items (pairs dedup saw close at a recall-first level, whatever it decided),
and the dev-sealed near pairs each release recorded

Links are filled from the decisions stored so far: each item's matched item and duplicate link,
its best MinHash and embedding neighbour and its vetoed matches, where their scores reach the
recall-first levels (`curation.dedup.rules.DedupConfig.link_levels`, with the thresholds each
decision recorded). Later curation records every neighbour it sees at those levels. Releases
written before keep `cross_split_pairs` null.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-14
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# The defaults of `DedupConfig` at this revision, for decisions that recorded no thresholds.
_MINHASH = 0.65
_GUARD = 0.72
_LSH_BELOW = 0.1
_CHUNK = 1000


def _json() -> Any:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _links(item_id: int, matched: int | None, stage: str, score: float | None, details: dict[str, Any]) -> list[tuple[int, int, str, float | None]]:
    """The links one stored decision shows (pairs with `item_id`)."""
    thresholds = details.get("thresholds") or {}
    minhash = float(thresholds.get("minhash", _MINHASH)) - _LSH_BELOW
    guard = thresholds.get("guard")
    embedding = float(guard) if guard is not None else (_GUARD if details.get("text") != "machine" else None)
    found: list[tuple[int, int, str, float | None]] = []
    if matched is not None:
        found.append((item_id, matched, stage if stage in ("exact", "minhash", "embedding", "override") else "override", score))
    best = details.get("best_jaccard") or {}
    if isinstance(best.get("item"), int) and isinstance(best.get("score"), int | float) and best["score"] >= minhash:
        found.append((item_id, best["item"], "minhash", float(best["score"])))
    best = details.get("best_embedding") or {}
    if embedding is not None and isinstance(best.get("item"), int) and isinstance(best.get("cosine"), int | float) and best["cosine"] >= embedding:
        found.append((item_id, best["item"], "embedding", float(best["cosine"])))
    for vetoed in details.get("vetoed") or []:
        other, stage_seen, seen = vetoed.get("item"), vetoed.get("stage"), vetoed.get("score")
        if not isinstance(other, int) or not isinstance(seen, int | float):
            continue
        level = {"exact": 0.0, "minhash": minhash, "embedding": embedding}.get(stage_seen)
        if level is not None and seen >= level:
            found.append((item_id, other, stage_seen, float(seen)))
    return [link for link in found if link[0] != link[1]]


def upgrade() -> None:
    op.create_table(
        "near_link",
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("other_id", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.ForeignKeyConstraint(["other_id"], ["item.id"]),
        sa.PrimaryKeyConstraint("item_id", "other_id"),
    )
    op.create_index(op.f("ix_near_link_other_id"), "near_link", ["other_id"], unique=False)
    with op.batch_alter_table("release", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cross_split_pairs", _json(), nullable=True))

    connection = op.get_bind()
    decision = sa.table(
        "dedup_decision",
        sa.column("id", sa.Integer),
        sa.column("item_id", sa.Integer),
        sa.column("matched_item_id", sa.Integer),
        sa.column("stage", sa.String),
        sa.column("score", sa.Float),
        sa.column("details", _json()),
    )
    item = sa.table("item", sa.column("id", sa.Integer), sa.column("duplicate_of", sa.Integer))
    link = sa.table(
        "near_link",
        sa.column("item_id", sa.Integer),
        sa.column("other_id", sa.Integer),
        sa.column("stage", sa.String),
        sa.column("score", sa.Float),
        sa.column("recorded_at", sa.DateTime(timezone=True)),
    )
    existing = {row[0] for row in connection.execute(sa.select(item.c.id))}
    links: dict[frozenset[int], tuple[int, int, str, float | None]] = {}
    for item_id, duplicate_of in connection.execute(sa.select(item.c.id, item.c.duplicate_of).where(item.c.duplicate_of.is_not(None))):
        links.setdefault(frozenset((item_id, duplicate_of)), (item_id, duplicate_of, "override", None))
    query = sa.select(decision.c.item_id, decision.c.matched_item_id, decision.c.stage, decision.c.score, decision.c.details).order_by(decision.c.id)
    for row in connection.execute(query):
        for found in _links(row.item_id, row.matched_item_id, row.stage, row.score, row.details if isinstance(row.details, dict) else {}):
            if found[0] in existing and found[1] in existing:
                key = frozenset(found[:2])
                # A pair's strongest evidence wins over the duplicate link's placeholder.
                if key not in links or (links[key][3] is None and found[3] is not None):
                    links[key] = found
    at = datetime.now(UTC)
    rows = [{"item_id": a, "other_id": b, "stage": stage, "score": score, "recorded_at": at} for a, b, stage, score in links.values()]
    for start in range(0, len(rows), _CHUNK):
        connection.execute(sa.insert(link), rows[start : start + _CHUNK])


def downgrade() -> None:
    with op.batch_alter_table("release", schema=None) as batch_op:
        batch_op.drop_column("cross_split_pairs")
    op.drop_index(op.f("ix_near_link_other_id"), table_name="near_link")
    op.drop_table("near_link")
