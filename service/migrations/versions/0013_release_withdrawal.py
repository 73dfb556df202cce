"""releases can be withdrawn: who withdrew one, when and why

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("release", schema=None) as batch_op:
        batch_op.add_column(sa.Column("withdrawn_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("withdrawn_by", sa.String(length=160), nullable=True))
        batch_op.add_column(sa.Column("withdrawn_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("release", schema=None) as batch_op:
        batch_op.drop_column("withdrawn_reason")
        batch_op.drop_column("withdrawn_by")
        batch_op.drop_column("withdrawn_at")
