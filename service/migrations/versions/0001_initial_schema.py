"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("api_token",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("name", sa.String(length=128), nullable=False),
    sa.Column("token_hash", sa.String(length=64), nullable=False),
    sa.Column("prefix", sa.String(length=16), nullable=False),
    sa.Column("scopes", JSON_TYPE, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_token_token_hash"), ["token_hash"], unique=True)

    op.create_table("audit_event",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("actor", sa.String(length=160), nullable=False),
    sa.Column("action", sa.String(length=64), nullable=False),
    sa.Column("object_type", sa.String(length=32), nullable=False),
    sa.Column("object_id", sa.String(length=255), nullable=True),
    sa.Column("count", sa.Integer(), nullable=False),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("details", JSON_TYPE, nullable=False),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("audit_event", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_event_action"), ["action"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_event_actor"), ["actor"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_event_at"), ["at"], unique=False)

    op.create_table("source",
    sa.Column("name", sa.String(length=64), nullable=False),
    sa.Column("kind", sa.String(length=32), nullable=False),
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("mapping", JSON_TYPE, nullable=True),
    sa.Column("config", JSON_TYPE, nullable=False),
    sa.Column("cursor", sa.String(), nullable=True),
    sa.Column("webhook_secret", sa.String(), nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("source", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_source_name"), ["name"], unique=True)

    op.create_table("item",
    sa.Column("external_id", sa.String(length=255), nullable=False),
    sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("title", sa.Text(), nullable=False),
    sa.Column("input", sa.Text(), nullable=False),
    sa.Column("reference", sa.Text(), nullable=False),
    sa.Column("tags", JSON_TYPE, nullable=False),
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("source_id", sa.Integer(), nullable=False),
    sa.Column("metadata", JSON_TYPE, nullable=False),
    sa.Column("content_hash", sa.String(length=64), nullable=False),
    sa.Column("record_digest", sa.String(length=64), nullable=False),
    sa.Column("revision", sa.Integer(), nullable=False),
    sa.Column("status", sa.String(length=16), nullable=False),
    sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(["source_id"], ["source.id"], ),
    sa.PrimaryKeyConstraint("id"),
    sa.UniqueConstraint("source_id", "external_id", name="uq_item_source_external_id")
    )
    with op.batch_alter_table("item", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_item_content_hash"), ["content_hash"], unique=False)
        batch_op.create_index(batch_op.f("ix_item_occurred_at"), ["occurred_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_item_source_id"), ["source_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_item_status"), ["status"], unique=False)

    op.create_table("item_revision",
    sa.Column("id", sa.Integer(), nullable=False),
    sa.Column("item_id", sa.Integer(), nullable=False),
    sa.Column("revision", sa.Integer(), nullable=False),
    sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("previous_digest", sa.String(length=64), nullable=False),
    sa.Column("previous", JSON_TYPE, nullable=False),
    sa.ForeignKeyConstraint(["item_id"], ["item.id"], ),
    sa.PrimaryKeyConstraint("id")
    )
    with op.batch_alter_table("item_revision", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_item_revision_item_id"), ["item_id"], unique=False)



def downgrade() -> None:
    with op.batch_alter_table("item_revision", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_item_revision_item_id"))

    op.drop_table("item_revision")
    with op.batch_alter_table("item", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_item_status"))
        batch_op.drop_index(batch_op.f("ix_item_source_id"))
        batch_op.drop_index(batch_op.f("ix_item_occurred_at"))
        batch_op.drop_index(batch_op.f("ix_item_content_hash"))

    op.drop_table("item")
    with op.batch_alter_table("source", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_source_name"))

    op.drop_table("source")
    with op.batch_alter_table("audit_event", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_event_at"))
        batch_op.drop_index(batch_op.f("ix_audit_event_actor"))
        batch_op.drop_index(batch_op.f("ix_audit_event_action"))

    op.drop_table("audit_event")
    with op.batch_alter_table("api_token", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_token_token_hash"))

    op.drop_table("api_token")
