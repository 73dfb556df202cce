"""items: curators' edits (who changed a revision and why, held source changes)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every existing revision was written by a re-ingest: kind `source`, no actor, no note.
    with op.batch_alter_table("item_revision", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(length=16), server_default="source", nullable=False))
        batch_op.add_column(sa.Column("actor", sa.String(length=160), nullable=True))
        batch_op.add_column(sa.Column("note", sa.Text(), nullable=True))

    # No item has been edited yet: its text is the source's, and nothing is held.
    with op.batch_alter_table("item", schema=None) as batch_op:
        batch_op.add_column(sa.Column("curated_revision", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("source_changed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("item", schema=None) as batch_op:
        batch_op.drop_column("source_changed_at")
        batch_op.drop_column("curated_revision")

    with op.batch_alter_table("item_revision", schema=None) as batch_op:
        batch_op.drop_column("note")
        batch_op.drop_column("actor")
        batch_op.drop_column("kind")
