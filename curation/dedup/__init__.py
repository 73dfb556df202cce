"""Dedup: deciding, for every candidate in incident order, whether it is new.

Owns: the decision engine (`deduplicator`: exact, near-verbatim MinHash, paraphrase embeddings,
contamination by a reference corpus), MinHash sketches and their recipe (`fingerprints`), the
embedding protocol, the default offline model and the vector cache (`embeddings`), vectors from
an OpenAI-compatible embeddings server through a client the caller passes in (`http_encoder`), the
in-memory index (`index`) and its approximate search of a large pool (`ann`, `ann_file`), text
kinds (`text_kind`), ranking the items most like one (`similarity`, `lexical`), re-fingerprinting after a recipe or model change (`refingerprint`),
the cheap reads that say whether curation has work or a kept index is stale (`state`), people's
rulings that overrule it (`overrides`), and its figures and close calls (`stats`).
May use: `schemas`, `ingest.normalisation`, `ingest.http` (retry timing).
"""
