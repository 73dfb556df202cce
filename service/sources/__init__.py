"""Sources: where items come from, and getting records in.

Owns: source definitions with their mapping, webhook secret and encrypted connector settings
(`definitions`), storing a batch of records (`ingestion`), pulling a connector source now, one
pull per source at a time (`pulls`), webhook signatures (`webhooks`), the routes under
`/v1/sources` (`routes`) and the `source`, `ingest`, `reference` and `pull` commands (`cli`).
May use: `service.core`, `ingest`, `schemas`; `service.dedup` to curate after an ingest.
"""
