"""model registry, runs, the exposure ledger and results

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('model',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('provider', sa.String(length=128), nullable=False),
    sa.Column('training_cutoff', sa.Date(), nullable=True),
    sa.Column('release_date', sa.Date(), nullable=True),
    sa.Column('notes', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('model', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_name'), ['name'], unique=True)

    op.create_table('endpoint',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('base_url', sa.String(length=2048), nullable=False),
    sa.Column('provider', sa.String(length=128), nullable=False),
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('trains_on_inputs', sa.String(length=8), nullable=False),
    sa.Column('retention_days', sa.Integer(), nullable=True),
    sa.Column('terms_url', sa.String(length=2048), nullable=False),
    sa.Column('terms_checked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('checked_by', sa.String(length=160), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['model.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('endpoint', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_endpoint_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_endpoint_name'), ['name'], unique=True)

    op.create_table('run',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('eval_id', sa.Integer(), nullable=False),
    sa.Column('release_id', sa.Integer(), nullable=False),
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('endpoint_id', sa.Integer(), nullable=False),
    sa.Column('split', sa.String(length=8), nullable=False),
    sa.Column('actor', sa.String(length=160), nullable=False),
    sa.Column('idempotency_key', sa.String(length=128), nullable=True),
    sa.Column('occurred_after', sa.DateTime(timezone=True), nullable=True),
    sa.Column('item_count', sa.Integer(), nullable=False),
    sa.Column('trains_on_inputs', sa.String(length=8), nullable=False),
    sa.Column('terms_checked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('exposes_items', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['endpoint_id'], ['endpoint.id'], ),
    sa.ForeignKeyConstraint(['eval_id'], ['eval.id'], ),
    sa.ForeignKeyConstraint(['model_id'], ['model.id'], ),
    sa.ForeignKeyConstraint(['release_id'], ['release.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('actor', 'idempotency_key', name='uq_run_actor_idempotency_key')
    )
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_run_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_endpoint_id'), ['endpoint_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_eval_id'), ['eval_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_release_id'), ['release_id'], unique=False)

    op.create_table('result',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('human_success', sa.Float(), nullable=True),
    sa.Column('actor', sa.String(length=160), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'item_id', name='uq_result_run_item')
    )
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_result_item_id'), ['item_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_result_run_id'), ['run_id'], unique=False)

    op.create_table('run_item',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('endpoint_id', sa.Integer(), nullable=False),
    sa.Column('release_id', sa.Integer(), nullable=False),
    sa.Column('split', sa.String(length=8), nullable=False),
    sa.Column('occurred_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('content_digest', sa.String(length=64), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['endpoint_id'], ['endpoint.id'], ),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ),
    sa.ForeignKeyConstraint(['release_id'], ['release.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'item_id', name='uq_run_item_run_item')
    )
    with op.batch_alter_table('run_item', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_run_item_endpoint_id'), ['endpoint_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_item_item_id'), ['item_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_item_release_id'), ['release_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_run_item_run_id'), ['run_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('run_item', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_item_run_id'))
        batch_op.drop_index(batch_op.f('ix_run_item_release_id'))
        batch_op.drop_index(batch_op.f('ix_run_item_item_id'))
        batch_op.drop_index(batch_op.f('ix_run_item_endpoint_id'))

    op.drop_table('run_item')
    with op.batch_alter_table('result', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_result_run_id'))
        batch_op.drop_index(batch_op.f('ix_result_item_id'))

    op.drop_table('result')
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_release_id'))
        batch_op.drop_index(batch_op.f('ix_run_model_id'))
        batch_op.drop_index(batch_op.f('ix_run_eval_id'))
        batch_op.drop_index(batch_op.f('ix_run_endpoint_id'))
        batch_op.drop_index(batch_op.f('ix_run_created_at'))

    op.drop_table('run')
    with op.batch_alter_table('endpoint', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_endpoint_name'))
        batch_op.drop_index(batch_op.f('ix_endpoint_model_id'))

    op.drop_table('endpoint')
    with op.batch_alter_table('model', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_name'))

    op.drop_table('model')
