"""embeddings record the share of their text the model cannot read

Rows stored before carry none (NULL): curation measures those texts again from the item when it
needs them (`curation.dedup.facts.StoredFacts.unreadable`).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("embedding", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unreadable", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("embedding", schema=None) as batch_op:
        batch_op.drop_column("unreadable")
