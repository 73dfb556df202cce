"""Dedup throughput, measured in one run on this machine. Prints figures; not a test.

1. records/s of ingest alone (mapping, redaction, fingerprint hash, inserts; no curation) of N
   unique real reports into SQLite; and, as `goldenset ingest` takes a large file, of
   `--file-records` distinct records (the reports again under other ids, each text changed) in a
   fresh process, prepared here and in one worker process per core; items/s of ingest + curate on
   the N reports, divided by items/s of bare `model.encode` of the same texts (the pipeline's body
   and title texts), in the same run;
2. encoder calls when a share of the items are exact duplicates (they must cost none);
3. a second ingest + curate over unchanged data, as a share of the first run's time;
4. index rebuild time and memory per item at 10k and 100k stored items (synthetic texts).

With `--device cuda` (a GPU machine), encoding uses the backfill encoder (length-sorted fp16
batches, the tokenizer running ahead in a thread) and the plain `model.encode` on the same device
is timed beside it.

On the CPU, `--backend` picks the encoder (`embedding.backends`; default: `auto`, the one
the service picks on this machine for a new pool).

Usage: .venv/bin/python bench/throughput.py [--reports 1000] [--sizes 10000,100000] [--backend torch] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sqlmodel import Session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import DATA, ROOT, database, ingest, session
from curation.dedup.deduplicator import Deduplicator
from curation.dedup.embeddings import Encoder, Vectors, body_text, text_hash
from curation.dedup.fingerprints import MinHashRecipe, sketch_texts, to_bytes
from curation.dedup.index import SimilarityIndex
from embedding.backend_choice import machine_choice
from embedding.backends import BACKENDS, load_encoder
from embedding.models import SentenceTransformerEncoder
from embedding.pipelined import PipelinedEncoder
from ingest.mapping import load_mapping
from ingest.preparing import usable_cores
from schemas.common import utcnow
from schemas.dedup import Embedding, ItemFingerprint
from schemas.item import Item
from schemas.source import Source
from service.core.db import write_transaction


class CountingEncoder:
    def __init__(self, inner: Encoder) -> None:
        self.inner, self.model_id, self.dim, self.calls, self.texts = inner, inner.model_id, inner.dim, 0, 0

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        self.texts += len(texts)
        return self.inner.encode(texts)


def pipeline(workdir: Path, name: str, records: list[dict[str, object]], encoder: CountingEncoder) -> float:
    engine = database(workdir / f"{name}.db")
    started = time.perf_counter()
    ingest(engine, name, records, load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml"))
    # As the service curates: batches prepared (and encoded) ahead while the previous one's decisions are written.
    dedup = Deduplicator(clock=utcnow, encoder=encoder)
    dedup.curate_in_steps(lambda: Session(engine), lambda: write_transaction(engine), ahead=True)
    return time.perf_counter() - started


def file_ingest(count: int, workers: int) -> float:
    """records/s of a fresh process storing `count` distinct records as `goldenset ingest` stores a
    file (`workers` processes preparing records), into a new SQLite database."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from bench.throughput import _file_ingest_child; _file_ingest_child(int(sys.argv[2]), int(sys.argv[3]))"
    )
    child = subprocess.run([sys.executable, "-c", code, str(ROOT), str(count), str(workers)], capture_output=True, text=True, check=True)  # noqa: S603 (this interpreter)
    return float(child.stdout.strip().splitlines()[-1])


def _file_ingest_child(count: int, workers: int) -> None:
    reports = [json.loads(line) for line in (DATA / "gitbugs_hadoop" / "reports.jsonl").read_text().splitlines()]
    records = [
        {**report, "id": f"{copy}-{report['id']}", "description": f"{report.get('description') or ''} (copy {copy})"}
        for copy in range(count // len(reports) + 1)
        for report in reports
    ][:count]
    engine = database(Path(tempfile.mkdtemp(prefix="goldenset-file-ingest-")) / "ingest.db")
    started = time.perf_counter()
    ingest(engine, "file", records, load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml"), workers=workers)
    print(round(count / (time.perf_counter() - started), 1))


def rebuild(workdir: Path, size: int, dim: int) -> dict[str, float]:
    """Store `size` synthetic decided items with sketches and vectors, then time a cold index rebuild."""
    engine = database(workdir / f"rebuild-{size}.db")
    recipe = MinHashRecipe()
    model_id = "synthetic"
    rng = random.Random(size)
    words = [f"w{n}" for n in range(5000)]
    with session(engine) as db:
        source = Source(name="synthetic", kind="file")
        db.add(source)
        db.commit()
        now = utcnow()
        for start in range(0, size, 5000):
            count = min(5000, size - start)
            texts = [" ".join(rng.choices(words, k=40)) for _ in range(count)]
            sketches = sketch_texts(texts, recipe)
            vectors = np.random.default_rng(start).standard_normal((count, dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            items = [
                Item(
                    source_id=source.id or 0,
                    external_id=f"s{start + i}",
                    occurred_at=now,
                    input=texts[i],
                    content_hash=f"{start + i:064x}",
                    record_digest="0" * 64,
                    status="unique",
                )
                for i in range(count)
            ]
            db.add_all(items)
            db.flush()
            for item, sketch, vector, text in zip(items, sketches, vectors, texts, strict=True):
                key = text_hash(text)
                db.add(Embedding(text_hash=key, model_id=model_id, dim=dim, vector=vector.tobytes()))
                db.add(ItemFingerprint(item_id=item.id or 0, recipe=recipe.key, minhash=to_bytes(sketch), model_id=model_id, body_key=key, title_key=key))
            db.commit()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, cpu_started = time.perf_counter(), time.process_time()
    with session(engine) as db:
        index = SimilarityIndex.load(db, recipe=recipe, model_id=model_id, dim=dim, lsh_threshold=0.6)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert len(index) == size
    growth = round((rss_after - rss_before) * 1024 / size, 1)
    return {"items": size, "rebuild_seconds": round(seconds, 2), "rebuild_cpu_seconds": round(cpu_seconds, 2), "peak_rss_growth_bytes_per_item": growth}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reports", type=int, default=1000)
    parser.add_argument("--duplicate-share", type=float, default=0.3)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--file-records", type=int, default=20_000, help="records of the large-file ingest measure (0: skip it)")
    parser.add_argument("--device", default="cpu", help="cpu, or a CUDA device (cuda, cuda:1): encode with the backfill encoder, fp16, tokenizer ahead")
    parser.add_argument("--backend", default="auto", choices=["auto", *BACKENDS], help="the CPU encoder's backend (auto: this machine's, as the service picks it for a new pool)")
    parser.add_argument("--batch-size", type=int, default=256, help="texts per forward pass on a CUDA device")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="goldenset-throughput-"))
    reports = [json.loads(line) for line in (DATA / "gitbugs_hadoop" / "reports.jsonl").read_text().splitlines()][: args.reports]
    backend = machine_choice() if args.backend == "auto" else args.backend
    inner: Encoder = load_encoder(None, backend) if args.device == "cpu" else PipelinedEncoder(device=args.device, batch_size=args.batch_size)
    figures: dict[str, object] = {"model": inner.model_id, "device": args.device, "backend": backend if args.device == "cpu" else "torch", "reports": len(reports)}

    texts = [body_text(r["title"], f"{r['title']}\n\n{r.get('description') or ''}".strip()) for r in reports] + [r["title"] for r in reports]
    if args.device != "cpu":
        # The plain `model.encode` on the same device, for comparison (the host is its limit).
        naive = SentenceTransformerEncoder(device=args.device, batch_size=args.batch_size)
        naive.encode(texts[:64])
        inner.encode(texts[:64])
        started = time.perf_counter()
        naive.encode(texts)
        figures["naive_encode_texts_per_s"] = round(len(texts) / (time.perf_counter() - started), 1)
    inner.encode(texts[:64])  # warm: first calls allocate and compile
    started = time.perf_counter()
    inner.encode(texts)
    bare = time.perf_counter() - started
    figures["bare_encode_texts_per_s"] = round(len(texts) / bare, 1)
    engine = database(workdir / "ingest-alone.db")
    started = time.perf_counter()
    ingest(engine, "alone", reports, load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml"))
    figures["ingest_alone_records_per_s"] = round(len(reports) / (time.perf_counter() - started), 1)
    if args.file_records:
        figures["file_ingest_records"] = args.file_records
        figures["file_ingest_records_per_s"] = file_ingest(args.file_records, 1)
        figures["file_ingest_workers"] = usable_cores()
        figures["file_ingest_parallel_records_per_s"] = file_ingest(args.file_records, usable_cores())
    encoder = CountingEncoder(inner)
    first = pipeline(workdir, "unique", reports, encoder)
    figures["bare_encode_items_per_s"] = round(len(reports) / bare, 1)
    figures["pipeline_items_per_s"] = round(len(reports) / first, 1)
    figures["pipeline_over_bare_encode"] = round(bare / first, 3)
    figures["texts_encoded"] = encoder.texts

    again_started = time.perf_counter()
    second = pipeline(workdir, "unique", reports, encoder)
    figures["rerun_unchanged_share_of_first"] = round(second / first, 3)
    figures["rerun_texts_encoded"] = encoder.texts - figures["texts_encoded"]  # type: ignore[operator]
    del again_started

    rng = random.Random(11)
    copies = []
    for n, report in enumerate(rng.sample(reports, int(len(reports) * args.duplicate_share))):
        # an exact duplicate up to volatile tokens: every standalone number changed
        description = re.sub(r"(?<![\w.])\d+(?![\w.])", lambda m: str(int(m.group()) + 1), report.get("description") or "")
        copies.append({**report, "id": f"copy-{n}", "description": description, "created": "2024-12-31T00:00:00"})
    mixed = CountingEncoder(inner)
    pipeline(workdir, "mixed", reports + copies, mixed)
    figures["exact_duplicates"] = len(copies)
    figures["texts_encoded_with_duplicates"] = mixed.texts
    figures["encoder_texts_for_duplicates"] = mixed.texts - figures["texts_encoded"]  # type: ignore[operator]

    figures["rebuild"] = [rebuild(workdir, int(size), inner.dim) for size in args.sizes.split(",")]
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
