"""embedding backend switches that kept the stored vectors, with the cosines that allowed it

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "embedding_equivalence",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("from_model_id", sa.String(length=255), nullable=False),
        sa.Column("to_model_id", sa.String(length=255), nullable=False),
        sa.Column("texts", sa.Integer(), nullable=False),
        sa.Column("min_cosine", sa.Float(), nullable=False),
        sa.Column("mean_cosine", sa.Float(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("embedding_equivalence")
