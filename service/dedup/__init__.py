"""Dedup in the service: running the single-writer curation, explaining it, and people overruling it.

Owns: the process-wide embedding model (`encoder`), the `http` embedding backend and the gate its
endpoint must pass (`http_backend`), the curation run under its lock, re-
fingerprinting and the background trigger after ingest (`runner`), the read-only index behind
the read API (`reader`), dedup's figures and close calls with sealed items withheld (`reads`),
the routes `/v1/items/{id}/similar`, `/v1/dedup/check`, `/v1/dedup/stats`,
`/v1/dedup/low-margin` and the rulings `/v1/items/{id}/not-duplicate` and `/duplicate-of`
(`routes`), and the `curate` and `dedup` commands (`cli`).
May use: `service.core`, `curation.dedup`, `curation.runs.gate`, `service.items.reads`, `schemas`.
"""
