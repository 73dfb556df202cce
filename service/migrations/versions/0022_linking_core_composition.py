"""linking core and balanced composition: an eval's linking share and balance setting; a
release's composition and linking core

Evals made before take the defaults (30% of the dev split carried, composition balanced) from
their next release on; releases written before record neither (NULL).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-22
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def _json() -> Any:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("eval") as batch:
        batch.add_column(sa.Column("linking_share", sa.Float(), nullable=False, server_default="0.3"))
        batch.add_column(sa.Column("balance_composition", sa.Boolean(), nullable=False, server_default=sa.true()))
    with op.batch_alter_table("release") as batch:
        batch.add_column(sa.Column("composition", _json(), nullable=True))
        batch.add_column(sa.Column("linking", _json(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("release") as batch:
        batch.drop_column("linking")
        batch.drop_column("composition")
    with op.batch_alter_table("eval") as batch:
        batch.drop_column("balance_composition")
        batch.drop_column("linking_share")
