"""evals, releases, the sealed slice; item exposure

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "eval",
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("sources", JSON_TYPE, nullable=False),
        sa.Column("target_size", sa.Integer(), nullable=False),
        sa.Column("schedule", sa.String(length=120), nullable=False),
        sa.Column("max_age_days", sa.Integer(), nullable=True),
        sa.Column("earliest_occurred_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("source_quotas", JSON_TYPE, nullable=False),
        sa.Column("sealed_fraction", sa.Float(), nullable=False),
        sa.Column("approval_policy", sa.String(length=16), nullable=False),
        sa.Column("sealed_read_budget", sa.Integer(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("canary", sa.String(length=80), nullable=False),
        sa.Column("seal_key", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("eval", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_eval_name"), ["name"], unique=True)
    op.create_table(
        "eval_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("eval_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("split", sa.String(length=8), nullable=False),
        sa.Column("first_release", sa.Integer(), nullable=False),
        sa.Column("retired_release", sa.Integer(), nullable=True),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("retired_reason", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(["eval_id"], ["eval.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("eval_id", "item_id", name="uq_eval_item_eval_item"),
    )
    with op.batch_alter_table("eval_item", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_eval_item_eval_id"), ["eval_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_eval_item_item_id"), ["item_id"], unique=False)
    op.create_table(
        "release",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("eval_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("period_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("period_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("canary", sa.String(length=80), nullable=False),
        sa.Column("dev_root", sa.String(length=64), nullable=False),
        sa.Column("sealed_root", sa.String(length=64), nullable=False),
        sa.Column("dev_count", sa.Integer(), nullable=False),
        sa.Column("sealed_count", sa.Integer(), nullable=False),
        sa.Column("diff", JSON_TYPE, nullable=False),
        sa.ForeignKeyConstraint(["eval_id"], ["eval.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("eval_id", "number", name="uq_release_eval_number"),
        sa.UniqueConstraint("eval_id", "period_start", name="uq_release_eval_period"),
    )
    with op.batch_alter_table("release", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_release_eval_id"), ["eval_id"], unique=False)
    op.create_table(
        "release_item",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("release_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("split", sa.String(length=8), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("content_digest", sa.String(length=64), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["item.id"]),
        sa.ForeignKeyConstraint(["release_id"], ["release.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("release_id", "item_id", name="uq_release_item_release_item"),
    )
    with op.batch_alter_table("release_item", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_release_item_item_id"), ["item_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_release_item_release_id"), ["release_id"], unique=False)
    op.create_table(
        "sealed_read",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("release_id", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(length=160), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["release_id"], ["release.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("sealed_read", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_sealed_read_release_id"), ["release_id"], unique=False)
    with op.batch_alter_table("item", schema=None) as batch_op:
        batch_op.add_column(sa.Column("exposed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("exposed_reason", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("item", schema=None) as batch_op:
        batch_op.drop_column("exposed_reason")
        batch_op.drop_column("exposed_at")
    with op.batch_alter_table("sealed_read", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sealed_read_release_id"))
    op.drop_table("sealed_read")
    with op.batch_alter_table("release_item", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_release_item_release_id"))
        batch_op.drop_index(batch_op.f("ix_release_item_item_id"))
    op.drop_table("release_item")
    with op.batch_alter_table("release", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_release_eval_id"))
    op.drop_table("release")
    with op.batch_alter_table("eval_item", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_eval_item_item_id"))
        batch_op.drop_index(batch_op.f("ix_eval_item_eval_id"))
    op.drop_table("eval_item")
    with op.batch_alter_table("eval", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_eval_name"))
    op.drop_table("eval")
