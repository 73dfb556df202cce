"""endpoints record how they give log-probabilities (none, completions_echo, tgi_prefill, chat),
which decides the membership tests a probe can run through them

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("endpoint", schema=None) as batch_op:
        batch_op.add_column(sa.Column("logprobs", sa.String(length=24), nullable=False, server_default="none"))


def downgrade() -> None:
    with op.batch_alter_table("endpoint", schema=None) as batch_op:
        batch_op.drop_column("logprobs")
