"""The service's cross-cutting pieces, used by every domain.

Owns: settings (`settings`), the database engine, sessions and migrations (`db`), process-safe
locks (`locks`), secrets at rest (`crypto`), bearer tokens and scope checks (`tokens`, `auth`),
the audit trail (`audit`), problem details (`problems`), logs and metrics (`logs`, `metrics`),
FastAPI dependencies (`deps`), opaque page cursors (`cursors`), what every command shares
(`terminal`: consoles, exit statuses, progress bar), whether the `embeddings` extra is installed
and the one line that says it is not (`embedding_extra`), and the service's own routes (`routes`:
health, metrics, the audit trail).
May use: `schemas`. No domain package of the service.
"""
