"""Ingest: mapping raw records into dated items, redaction, normalisation, persistence."""
