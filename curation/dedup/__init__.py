"""Dedup: deciding, for every candidate in incident order, whether it is new.

Owns: the decision engine (`deduplicator`: exact, near-verbatim MinHash, paraphrase embeddings,
contamination by a reference corpus), MinHash sketches and their recipe (`fingerprints`), the
encoder protocol curation is handed and the vector cache (`embeddings`), what a model cannot read
as evidence (`readability`), the in-memory index (`index`) and its approximate search of a large
pool (`ann`, over the graph of `ann_graph`), kept between loads by the files its caller hands in
(`index_files`: the protocol), text kinds (`text_kind`), ranking the items most like one
(`similarity`, `lexical`), re-fingerprinting after a recipe or model change (`refingerprint`),
adopting an equivalent backend's vectors (`equivalence`), the cheap reads that say whether
curation has work or a kept index is stale (`state`), people's rulings that overrule it
(`overrides`), and its figures and close calls (`stats`).
The encoder, the index files and the clock are handed in by the caller (the service builds the
runtime ones: `embedding`).
May use: `schemas`, `ingest.normalisation`. Never `embedding`: the runtime is handed in.
"""
