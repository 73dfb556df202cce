"""runs, their results, sealed reads and audit events record the token's id (names are labels);
releases record how their sealed items' digests are made

Rows written before carry no token id: `service.runs.runs` refuses every token a re-reading of
such a sealed run, and takes their results from an admin only. Releases written before keep the
plain sha256 digests they were written with (`sealed_digest` = `sha256`).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-11
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

TOKEN_TABLES = ("run", "result", "sealed_read")


def upgrade() -> None:
    for table in TOKEN_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("token_id", sa.Integer(), nullable=True))
    with op.batch_alter_table("audit_event", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_audit_event_token_id"), ["token_id"], unique=False)
    with op.batch_alter_table("release", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sealed_digest", sa.String(length=16), nullable=False, server_default="sha256"))


def downgrade() -> None:
    with op.batch_alter_table("release", schema=None) as batch_op:
        batch_op.drop_column("sealed_digest")
    with op.batch_alter_table("audit_event", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_event_token_id"))
        batch_op.drop_column("token_id")
    for table in TOKEN_TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("token_id")
