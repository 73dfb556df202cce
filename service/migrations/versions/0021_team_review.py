"""team review: an eval's reviewers per item, agreement sample, assignment, named reviewers and
adjudicators and guidelines; reviewers' votes and claimed batches

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-21
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def _json() -> Any:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("eval") as batch:
        batch.add_column(sa.Column("reviewers_per_item", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("agreement_sample", sa.Float(), nullable=False, server_default="1.0"))
        batch.add_column(sa.Column("review_assignment", sa.String(length=16), nullable=False, server_default="open"))
        batch.add_column(sa.Column("reviewers", _json(), nullable=False, server_default="[]"))
        batch.add_column(sa.Column("adjudicators", _json(), nullable=False, server_default="[]"))
        batch.add_column(sa.Column("review_guidelines", sa.Text(), nullable=False, server_default=""))
    op.create_table(
        "review_vote",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("eval_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("reviewer", sa.String(length=160), nullable=False),
        sa.Column("decision", sa.String(length=8), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("cast_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=8), nullable=True),
        sa.ForeignKeyConstraint(["eval_id"], ["eval.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_review_vote_eval_id"), "review_vote", ["eval_id"], unique=False)
    op.create_index(op.f("ix_review_vote_item_id"), "review_vote", ["item_id"], unique=False)
    op.create_index(op.f("ix_review_vote_reviewer"), "review_vote", ["reviewer"], unique=False)
    op.create_index("ix_review_vote_round", "review_vote", ["eval_id", "item_id", "settled_at"], unique=False)
    op.create_index(
        "uq_review_vote_open",
        "review_vote",
        ["eval_id", "item_id", "reviewer"],
        unique=True,
        sqlite_where=sa.text("settled_at IS NULL"),
        postgresql_where=sa.text("settled_at IS NULL"),
    )
    op.create_table(
        "review_claim",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("eval_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("reviewer", sa.String(length=160), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["eval_id"], ["eval.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("eval_id", "item_id", "reviewer", name="uq_review_claim"),
    )
    op.create_index(op.f("ix_review_claim_eval_id"), "review_claim", ["eval_id"], unique=False)
    op.create_index(op.f("ix_review_claim_reviewer"), "review_claim", ["reviewer"], unique=False)
    op.create_index("ix_review_claim_item", "review_claim", ["eval_id", "item_id"], unique=False)


def downgrade() -> None:
    op.drop_table("review_claim")
    op.drop_table("review_vote")
    with op.batch_alter_table("eval") as batch:
        for column in ("review_guidelines", "adjudicators", "reviewers", "review_assignment", "agreement_sample", "reviewers_per_item"):
            batch.drop_column(column)
