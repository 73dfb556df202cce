"""The goldenset service: how curation is reached and guarded. The FastAPI app (`app`), the
command line (`cli`), the scheduler process (`scheduler`), the Python client for eval pipelines
(`client`), the Alembic migrations (`migrations/`), the cross-cutting pieces (`core/`) and one
package per domain, each holding its data access, its routes and its commands: `sources/`,
`items/`, `dedup/`, `evals/`, `runs/`, `evidence/`.

Owns: transactions (it opens sessions, takes locks, commits), settings, authentication and
scopes, the audit trail, HTTP problems and exit statuses, background work.
May use: everything (`schemas`, `ingest`, `curation`). Inside it, `core` uses no domain; a
domain's routes are mounted only by `app` and its commands registered only by `cli`.
"""
