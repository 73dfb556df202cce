"""pull connectors: source state

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("source", schema=None) as batch_op:
        batch_op.add_column(sa.Column("connector_secret", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("pull_interval_seconds", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.true()))
        batch_op.add_column(sa.Column("status", sa.String(length=16), nullable=False, server_default="idle"))
        batch_op.add_column(sa.Column("last_run_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("items_pulled", sa.Integer(), nullable=False, server_default="0"))
        batch_op.alter_column("cursor", existing_type=sa.String(), type_=sa.Text(), existing_nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("source", schema=None) as batch_op:
        batch_op.alter_column("cursor", existing_type=sa.Text(), type_=sa.String(), existing_nullable=True)
        for column in ("items_pulled", "last_error", "last_success_at", "last_run_at", "status", "enabled", "pull_interval_seconds", "connector_secret"):
            batch_op.drop_column(column)
