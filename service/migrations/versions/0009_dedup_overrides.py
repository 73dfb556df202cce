"""dedup: people's overrides of duplicate decisions

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dedup_override",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("other_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(length=160), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.ForeignKeyConstraint(["other_id"], ["item.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("dedup_override", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dedup_override_item_id"), ["item_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_dedup_override_other_id"), ["other_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dedup_override", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dedup_override_other_id"))
        batch_op.drop_index(batch_op.f("ix_dedup_override_item_id"))
    op.drop_table("dedup_override")
