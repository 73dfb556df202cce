"""endpoints record whether the model behind them is augmented (retrieval, web search, tools);
runs keep what their endpoint was when they started

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("endpoint", schema=None) as batch_op:
        batch_op.add_column(sa.Column("augmented", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("augmentations", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=False, server_default="[]"))
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("augmented", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("augmented")
    with op.batch_alter_table("endpoint", schema=None) as batch_op:
        batch_op.drop_column("augmentations")
        batch_op.drop_column("augmented")
