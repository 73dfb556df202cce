"""Embedding backends (`embedding/backends.py`) compared in one run on this machine. Prints a
table and the figures as JSON; not a test.

Each configuration is a backend at a max_seq_length (`onnx-int8:128`). After its load (an export
the first time, timed apart; later runs reuse the cached export):

- items/s: GitBugs reports per second, each report's body and title texts as curation embeds them
  (`body_text` / `title_text` of the ingested items, as in bench/throughput.py), over the first
  `--reports` reports in one warm `encode` call, the fastest of `--rounds` calls taken in turn
  with the other configurations; "x torch": over PyTorch fp32 at 256 tokens, in the same run;
- mean and worst cosine of those texts' vectors to PyTorch fp32's at 256 tokens;
- recall@5 of each maintainer-linked pair's earlier report, by the embedding alone and by the
  engine's fused ranking, over all 2,503 reports: the `gitbugs` measure of bench/dedup_quality.py;
- decision agreement: the share of reports whose status and duplicate_of, from the real
  `Deduplicator` streaming all reports in that measure, equal those under PyTorch fp32.

A configuration meets the targets at >= 3x torch's items/s, recall@5 (both) at most 0.01 below
torch's, and >= 98% of decisions agreeing.

With `--speed-only`, only items/s and the cosines to PyTorch fp32 (a few minutes instead of the
quality measure's several minutes per configuration).

Usage: .venv/bin/python bench/embedding_backends.py [--reports 1000] [--configs torch:256,onnx:256,...] [--speed-only] [--cache-dir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlmodel import select

from bench.common import DATA, ROOT, database, ingest, session
from bench.dedup_quality import gitbugs
from curation.dedup.deduplicator import Deduplicator
from curation.dedup.embeddings import Encoder, body_text, title_text
from embedding.backends import DEFAULT_CACHE_DIR, load_encoder
from ingest.mapping import load_mapping
from schemas.common import utcnow
from schemas.item import Item

DEFAULT_CONFIGS = "torch:256,onnx:256,onnx-int8:256,openvino:256,openvino-int8:256,torch:128,onnx-int8:128,openvino-int8:128"
REFERENCE = "torch:256"
TARGET_SPEEDUP = 3.0
TARGET_RECALL_DROP = 0.01
TARGET_AGREEMENT = 0.98


class Memo:
    """An encoder that encodes each distinct text once and keeps its vector."""

    def __init__(self, inner: Encoder) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.vectors: dict[str, np.ndarray[Any, Any]] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        missing = list(dict.fromkeys(text for text in texts if text not in self.vectors))
        if missing:
            self.vectors.update(zip(missing, self.inner.encode(missing), strict=True))
        return np.vstack([self.vectors[text] for text in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)


def records() -> list[dict[str, Any]]:
    """The GitBugs reports as bench/dedup_quality.py ingests them."""
    reports = [json.loads(line) for line in (DATA / "gitbugs_hadoop" / "reports.jsonl").read_text().splitlines()]
    return [{**report, "id": f"H{report['id']}"} for report in reports]


def pipeline_texts(workdir: Path, reports: list[dict[str, Any]]) -> list[str]:
    """Body texts then title texts of `reports`, from the items the normal ingest path stores."""
    engine = database(workdir / "texts.db")
    ingest(engine, "hadoop", reports, load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml"))
    with session(engine) as db:
        items = {item.external_id: item for item in db.exec(select(Item))}
    chosen = [items[str(report["id"])] for report in reports]
    return [body_text(item.title, item.input) for item in chosen] + [title_text(item.title, item.input) for item in chosen]


def decisions(workdir: Path) -> dict[str, tuple[str, str | None]]:
    """Each report's status and the report it duplicates, from a finished `gitbugs` measure."""
    engine = database(workdir / "gitbugs.db")
    with session(engine) as db:
        items = list(db.exec(select(Item)))
    external = {item.id: item.external_id for item in items}
    return {item.external_id: (str(item.status), external.get(item.duplicate_of) if item.duplicate_of else None) for item in items}


def load(config: str, cache_dir: Path) -> tuple[Encoder, dict[str, Any]]:
    """The encoder of `config` (`backend:max_seq_length`), warm, and its load figures."""
    backend, _, seq = config.partition(":")
    started = time.perf_counter()
    encoder = load_encoder(None, backend, max_seq_length=int(seq or 256), cache_dir=cache_dir)
    figures: dict[str, Any] = {"config": config, "model_id": encoder.model_id, "load_seconds": round(time.perf_counter() - started, 1)}
    figures["exported_now"] = bool(getattr(encoder, "exported", False))
    encoder.encode(["warm up", "a second, longer text to warm up with"] * 8)
    return encoder, figures


def timed(encoders: dict[str, Encoder], texts: list[str], rounds: int) -> dict[str, tuple[float, np.ndarray[Any, Any]]]:
    """The fastest of `rounds` timed `encode(texts)` calls per encoder, taken in turn (round robin,
    so a change of load on the machine touches every encoder alike), and the vectors."""
    best: dict[str, tuple[float, np.ndarray[Any, Any]]] = {}
    for _ in range(rounds):
        for config, encoder in encoders.items():
            started = time.perf_counter()
            vectors = encoder.encode(texts)
            seconds = time.perf_counter() - started
            if config not in best or seconds < best[config][0]:
                best[config] = (seconds, vectors)
    return best


def quality(config: str, encoder: Encoder, texts: list[str], vectors: np.ndarray[Any, Any], workdir: Path) -> dict[str, Any]:
    """recall@k and the engine's decisions over all reports (`gitbugs`), the timed texts' vectors
    reused."""
    memo = Memo(encoder)
    memo.vectors.update(zip(texts, vectors, strict=True))
    folder = workdir / config.replace(":", "-")
    started = time.perf_counter()
    result = gitbugs(folder, Deduplicator(clock=utcnow, encoder=memo))
    return {
        "recall_embedding": result["recall"]["embedding"],
        "recall_engine": result["recall"]["combined"],
        "hard_dev_set": result["hard_dev_set"],
        "marked_duplicate": result["pool"]["marked_duplicate"],
        "decisions": decisions(folder),
        "quality_seconds": round(time.perf_counter() - started, 1),
    }


def compare_speed(row: dict[str, Any], reference: dict[str, Any]) -> None:
    """Add `row`'s speed-up and cosines against the reference's (PyTorch fp32 at 256 tokens)."""
    cosines = np.sum(row["vectors"] * reference["vectors"], axis=1)
    row.update(cosine_mean=round(float(cosines.mean()), 4), cosine_worst=round(float(cosines.min()), 4))
    row["speedup"] = round(row["items_per_s"] / reference["items_per_s"], 2)


def compare(row: dict[str, Any], reference: dict[str, Any]) -> None:
    """Add `row`'s figures against the reference's: `compare_speed`'s, decisions and recall."""
    compare_speed(row, reference)
    same = sum(row["decisions"].get(key) == value for key, value in reference["decisions"].items())
    row["agreement"] = round(same / len(reference["decisions"]), 4)
    row["changed"] = sorted(key for key, value in reference["decisions"].items() if row["decisions"].get(key) != value)[:20]
    drops = [reference[name]["recall@5"] - row[name]["recall@5"] for name in ("recall_embedding", "recall_engine")]
    row["meets_targets"] = row["speedup"] >= TARGET_SPEEDUP and max(drops) <= TARGET_RECALL_DROP + 1e-9 and row["agreement"] >= TARGET_AGREEMENT


def table(rows: list[dict[str, Any]]) -> str:
    header = ("config", "load s", "items/s", "x torch", "cos mean", "cos worst", "r@5 emb", "r@5 engine", "agree", "dups", "targets")
    lines = [" | ".join(header), " | ".join("---" for _ in header)]
    for row in rows:
        cells = (
            row["config"] + (" (exported)" if row["exported_now"] else ""),
            f"{row['load_seconds']:.1f}",
            f"{row['items_per_s']:.1f}",
            f"{row['speedup']:.2f}",
            f"{row['cosine_mean']:.4f}",
            f"{row['cosine_worst']:.4f}",
            f"{row['recall_embedding']['recall@5']:.3f}",
            f"{row['recall_engine']['recall@5']:.3f}",
            f"{row['agreement']:.4f}",
            str(row["marked_duplicate"]),
            "met" if row["meets_targets"] else "-",
        )
        lines.append(" | ".join(cells))
    return "\n".join(f"| {line} |" for line in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reports", type=int, default=1000, help="Reports whose texts are timed (and compared by cosine).")
    parser.add_argument("--rounds", type=int, default=2, help="Timed passes per configuration, taken in turn; the fastest counts.")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="backend:max_seq_length, comma-separated; torch:256 is always measured.")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help="Exports go here where the model's folder is not writable.")
    parser.add_argument("--speed-only", action="store_true", help="Time and compare vectors only; skip recall and decisions.")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="goldenset-backends-"))
    reports = records()
    texts = pipeline_texts(workdir, reports[: args.reports])
    configs = [REFERENCE] + [config for config in args.configs.split(",") if config and config != REFERENCE]
    encoders: dict[str, Encoder] = {}
    rows: dict[str, dict[str, Any]] = {}
    for config in configs:
        encoders[config], rows[config] = load(config, args.cache_dir)
        print(f"loaded {config} in {rows[config]['load_seconds']} s{' (exported now)' if rows[config]['exported_now'] else ''}", flush=True)
    for config, (seconds, vectors) in timed(encoders, texts, args.rounds).items():
        rows[config].update(items_per_s=round(args.reports / seconds, 1), encode_seconds=round(seconds, 2), vectors=vectors)
        rows[config]["norm_error"] = float(np.abs(np.linalg.norm(vectors, axis=1) - 1).max())
        print(f"timed {config}: {rows[config]['items_per_s']} reports/s", flush=True)
    reference = rows[REFERENCE]
    if args.speed_only:
        for config in configs:
            row = rows[config]
            compare_speed(row, reference)
            print(f"| {config} | {row['items_per_s']:.1f} | {row['speedup']:.2f} | {row['cosine_mean']:.4f} | {row['cosine_worst']:.4f} |")
        figures = [{key: value for key, value in row.items() if key != "vectors"} for row in rows.values()]
        print(json.dumps(figures, indent=1))
        return
    for config in configs:
        rows[config].update(quality(config, encoders.pop(config), texts, rows[config]["vectors"], workdir))
        gc.collect()
        compare(rows[config], reference)
        print(table([rows[config]]).splitlines()[-1], flush=True)
    print(f"\n{len(texts)} texts of {args.reports} GitBugs reports timed, best of {args.rounds}; recall and decisions over {len(reports)} reports; workdir {workdir}\n")
    print(table(list(rows.values())))
    figures = [{key: value for key, value in row.items() if key not in ("vectors", "decisions")} for row in rows.values()]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
