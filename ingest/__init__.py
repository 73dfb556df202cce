"""Ingest: raw incident records turned into dated, redacted items, written idempotently.

Owns: connectors (`connectors/`: one module per incident system, a typed base, a registry with
entry points), readers of JSONL, CSV and JSON documents, the checks a record passes before it is
stored (`sanity`), the declarative field mapping, record versions (`versions`), incident
dates, redaction (`redaction/`), the text normalisation fingerprints are made of, preparing
records for storage, in worker processes for a large file (`preparing`), the item writer
(`store`), the paged pull with its cursor (`pull`), and the retry timing of every outbound HTTP
request goldenset makes (`http`).
May use: `schemas`. Never `curation`, `service` or the web framework: the HTTP client, the clock
and the database session are passed in.
"""
