"""scale fits: the item response model fitted over an eval's per-item results, one row per version

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-22
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def _json() -> Any:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "scale_fit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("eval_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("fitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("method", sa.String(length=64), nullable=False),
        sa.Column("results_through", sa.Integer(), nullable=False),
        sa.Column("observations", sa.Integer(), nullable=False),
        sa.Column("log_posterior", sa.Float(), nullable=False),
        sa.Column("converged", sa.Boolean(), nullable=False),
        sa.Column("summary", _json(), nullable=False),
        sa.Column("parameters", _json(), nullable=False),
        sa.Column("draw_count", sa.Integer(), nullable=False),
        sa.Column("draws", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(["eval_id"], ["eval.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("eval_id", "version", name="uq_scale_fit_version"),
    )
    op.create_index(op.f("ix_scale_fit_eval_id"), "scale_fit", ["eval_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_scale_fit_eval_id"), table_name="scale_fit")
    op.drop_table("scale_fit")
