"""an index that serves the review queue: items by status in incident order

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

INDEX = "ix_item_status_occurred_at_id_source_id"


def upgrade() -> None:
    # The queue counts and pages the `unique` items of some sources, oldest incident first: with
    # the source last, one index walk serves the count, any page depth and any set of sources.
    op.create_index(INDEX, "item", ["status", "occurred_at", "id", "source_id"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name="item")
