"""The embedding runtime: what turns texts into vectors on this machine, and the files the dedup
index keeps on disk. The service builds these objects from its settings and hands them to
curation, which sees them only through its own protocols (`curation.dedup.embeddings.Encoder`,
`curation.dedup.index_files.IndexFiles`) and never imports this package.

Owns: the local sentence-transformers model, offline (`models`: where it lies, its id and
dimension, the PyTorch encoder; the Hugging Face libraries' offline environment), the in-process
backends and their exports (`backends`, `exports`: ONNX Runtime and OpenVINO exports made once
from the model's weights, under a file lock, with the bundled calibration texts in
`calibration/`), `auto`'s choice of backend, timed once per machine and recorded under a file lock
(`backend_choice`), the pipelined GPU encoder for backfills (`pipelined`), vectors from an
OpenAI-compatible server through a client the caller passes in (`http_encoder`), the unreadable
share of a text by the model's tokenizer (`readability`), and the dedup index's files in a folder
with their `fcntl` lock (`index_files`).
It may take file locks, set the environment it needs and read the clock (to time backends). It
reads no settings (the service passes the values), and decides nothing about items: it never
opens the database.
May use: `schemas`, `ingest.http` (retry timing); never `curation`, `service` or the web framework.
"""
