"""endpoints record how they give log-probabilities (none, completions_echo, tgi_prefill, chat),
which decides the membership tests a probe can run through them; probes record the test they
ran and a reference test's reference model, endpoint and dev run

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
    with op.batch_alter_table("probe", schema=None) as batch_op:
        batch_op.add_column(sa.Column("test", sa.String(length=24), nullable=False, server_default="completion"))
        batch_op.add_column(sa.Column("reference_model_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("reference_endpoint_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("reference_run_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key("fk_probe_reference_model_id_model", "model", ["reference_model_id"], ["id"])
        batch_op.create_foreign_key("fk_probe_reference_endpoint_id_endpoint", "endpoint", ["reference_endpoint_id"], ["id"])
        batch_op.create_foreign_key("fk_probe_reference_run_id_run", "run", ["reference_run_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("probe", schema=None) as batch_op:
        batch_op.drop_constraint("fk_probe_reference_run_id_run", type_="foreignkey")
        batch_op.drop_constraint("fk_probe_reference_endpoint_id_endpoint", type_="foreignkey")
        batch_op.drop_constraint("fk_probe_reference_model_id_model", type_="foreignkey")
        batch_op.drop_column("reference_run_id")
        batch_op.drop_column("reference_endpoint_id")
        batch_op.drop_column("reference_model_id")
        batch_op.drop_column("test")
    with op.batch_alter_table("endpoint", schema=None) as batch_op:
        batch_op.drop_column("logprobs")
