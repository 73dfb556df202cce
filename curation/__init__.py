"""Curation: the domain's decisions, from a candidate to a released, guarded item.

Owns: dedup (`dedup/`), review decisions (`review`), curators' edits of items and their
histories (`editing`), releases and the sealed slice (`releases/`),
the run gate, the exposure ledger and run scores (`runs/`), contamination evidence
(`evidence/`), the confidence intervals of scores and differences (`intervals`), and the error a
refused decision raises (`refusals`).
The rule for the database: curation reads and writes through the `Session` its caller hands in
(or, for work committed batch by batch, a factory of sessions whose context commits when it
closes). It never opens a connection, never commits or rolls back, never takes a lock and never
reads goldenset's settings; it raises its own errors, which the service turns into
problems and exit statuses.
What it works with beyond the database is handed in too: the embedding model and the dedup
index's files (the service builds them from `embedding`, through the protocols
`curation.dedup.embeddings.Encoder` and `curation.dedup.index_files.IndexFiles`), and the clock
(`curation.clock`: a time, or a callable that gives it). Curation never reads the clock or the
environment itself (`tests/core/unit/test_curation_is_handed.py`).
May use: `schemas`; from `ingest`, only the normalisation helpers (`ingest.normalisation`) and
the outbound-HTTP retry timing (`ingest.http`). Never `service`, `embedding` or the web framework.
"""
