"""dedup questions: pairs curation asks a curator about (a paraphrase merge the same-incident judge
does not confirm, or a near pair the rules kept apart that the judge finds likely the same), and
the curators' answers

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-20
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def _json() -> Any:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "dedup_question",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("other_id", sa.Integer(), nullable=False),
        sa.Column("p_same", sa.Float(), nullable=False),
        sa.Column("rules_outcome", sa.String(length=16), nullable=False),
        sa.Column("evidence", _json(), nullable=False),
        sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("ruling", sa.String(length=16), nullable=True),
        sa.Column("ruled_by", sa.Integer(), nullable=True),
        sa.Column("ruled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.ForeignKeyConstraint(["other_id"], ["item.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_dedup_question_item_id"), "dedup_question", ["item_id"], unique=False)
    op.create_index(op.f("ix_dedup_question_other_id"), "dedup_question", ["other_id"], unique=False)
    op.create_index(op.f("ix_dedup_question_state"), "dedup_question", ["state"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_dedup_question_state"), table_name="dedup_question")
    op.drop_index(op.f("ix_dedup_question_other_id"), table_name="dedup_question")
    op.drop_index(op.f("ix_dedup_question_item_id"), table_name="dedup_question")
    op.drop_table("dedup_question")
