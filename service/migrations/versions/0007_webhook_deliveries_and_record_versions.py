"""webhook deliveries (replay refusal) and record versions on items

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_delivery",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("signed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["source_id"], ["source.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("source_id", "digest", name="uq_webhook_delivery_source_digest"),
    )
    with op.batch_alter_table("webhook_delivery", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_webhook_delivery_signed_at"), ["signed_at"], unique=False)

    # Existing items have no version: every record applies to them as before, and the first
    # versioned record sets it.
    with op.batch_alter_table("item", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_version", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("item", schema=None) as batch_op:
        batch_op.drop_column("source_version")

    with op.batch_alter_table("webhook_delivery", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhook_delivery_signed_at"))

    op.drop_table("webhook_delivery")
