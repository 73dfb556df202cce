"""Curation: dedup (exact, MinHash LSH, embeddings), review, rotation and releases, evidence."""
