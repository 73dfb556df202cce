"""Dedup in the service: running the single-writer curation, and explaining it.

Owns: the process-wide embedding model (`encoder`), the curation run under its lock, re-
fingerprinting and the background trigger after ingest (`runner`), the read-only index behind
the read API (`reader`), the routes `/v1/items/{id}/similar` and `/v1/dedup/check` (`routes`)
and the `curate` command (`cli`).
May use: `service.core`, `curation.dedup`, `service.items.reads`, `schemas`.
"""
