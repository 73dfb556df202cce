"""completion probes and per-item results on public corpora

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('corpus_result',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('human_success', sa.Float(), nullable=True),
    sa.Column('actor', sa.String(length=160), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ),
    sa.ForeignKeyConstraint(['model_id'], ['model.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('model_id', 'item_id', name='uq_corpus_result_model_item')
    )
    with op.batch_alter_table('corpus_result', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_corpus_result_item_id'), ['item_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_corpus_result_model_id'), ['model_id'], unique=False)

    op.create_table('probe',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('eval_id', sa.Integer(), nullable=True),
    sa.Column('release_id', sa.Integer(), nullable=True),
    sa.Column('source_id', sa.Integer(), nullable=True),
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('endpoint_id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('dataset', sa.String(length=255), nullable=False),
    sa.Column('split', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('settings', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('item_ids', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('total', sa.Integer(), nullable=False),
    sa.Column('done', sa.Integer(), nullable=False),
    sa.Column('report', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('actor', sa.String(length=160), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['endpoint_id'], ['endpoint.id'], ),
    sa.ForeignKeyConstraint(['eval_id'], ['eval.id'], ),
    sa.ForeignKeyConstraint(['model_id'], ['model.id'], ),
    sa.ForeignKeyConstraint(['release_id'], ['release.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ),
    sa.ForeignKeyConstraint(['source_id'], ['source.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('probe', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_probe_endpoint_id'), ['endpoint_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_probe_eval_id'), ['eval_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_probe_model_id'), ['model_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_probe_source_id'), ['source_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_probe_status'), ['status'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('probe', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_probe_status'))
        batch_op.drop_index(batch_op.f('ix_probe_source_id'))
        batch_op.drop_index(batch_op.f('ix_probe_model_id'))
        batch_op.drop_index(batch_op.f('ix_probe_eval_id'))
        batch_op.drop_index(batch_op.f('ix_probe_endpoint_id'))

    op.drop_table('probe')
    with op.batch_alter_table('corpus_result', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_corpus_result_model_id'))
        batch_op.drop_index(batch_op.f('ix_corpus_result_item_id'))

    op.drop_table('corpus_result')
