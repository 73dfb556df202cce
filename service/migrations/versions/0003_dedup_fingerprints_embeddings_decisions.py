"""dedup: fingerprints, embeddings, decisions

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "embedding",
        sa.Column("text_hash", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("text_hash", "model_id"),
    )
    op.create_table(
        "dedup_decision",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("matched_item_id", sa.Integer(), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("details", JSON_TYPE, nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.ForeignKeyConstraint(["matched_item_id"], ["item.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("dedup_decision", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dedup_decision_item_id"), ["item_id"], unique=False)
    op.create_table(
        "item_fingerprint",
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("recipe", sa.String(length=64), nullable=False),
        sa.Column("minhash", sa.LargeBinary(), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=True),
        sa.Column("body_key", sa.String(length=64), nullable=True),
        sa.Column("title_key", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.PrimaryKeyConstraint("item_id"),
    )
    with op.batch_alter_table("item", schema=None) as batch_op:
        # Existing hashes were computed with recipe n1; curation recomputes them.
        batch_op.add_column(sa.Column("hash_recipe", sa.String(length=16), nullable=False, server_default="n1"))
        batch_op.add_column(sa.Column("identity_key", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("duplicate_of", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_item_duplicate_of"), ["duplicate_of"], unique=False)
        batch_op.create_foreign_key("fk_item_duplicate_of_item", "item", ["duplicate_of"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("item", schema=None) as batch_op:
        batch_op.drop_constraint("fk_item_duplicate_of_item", type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_item_duplicate_of"))
        batch_op.drop_column("duplicate_of")
        batch_op.drop_column("identity_key")
        batch_op.drop_column("hash_recipe")
    op.drop_table("item_fingerprint")
    with op.batch_alter_table("dedup_decision", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dedup_decision_item_id"))
    op.drop_table("dedup_decision")
    op.drop_table("embedding")
