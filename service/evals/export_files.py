"""A release's split written as files for the harnesses teams run: JSON Lines and Parquet that
Hugging Face `datasets` loads with one row per item, and an lm-evaluation-harness task folder.

Every format takes the export rows (`schemas.release.ExportRow`, as `GET .../export.jsonl` serves
them, one item each, the canary in each row's `metadata`) and the release's manifest, which is
written beside the rows as its own file (`<name>.manifest.json`, or `manifest.json` in a task
folder): the Merkle roots and the sealed items' digests never become a row.

The Parquet columns are the JSON fields with the same values: `occurred_at` stays ISO 8601 text and
the item's own metadata stays JSON text (`metadata.item`), so a row reads the same in both formats.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

from schemas.release import ReleaseManifest

LM_EVAL_LOADER = '''"""Loads this task's rows from the folder it lies in, wherever lm-eval is run from."""

from pathlib import Path
from typing import Any

import datasets

HERE = Path(__file__).resolve().parent


def load_rows(**kwargs: Any) -> datasets.DatasetDict:
    """lm-eval's `custom_dataset`: called with the task's metadata and dataset_kwargs."""
    files = {split: str(HERE / name) for split, name in kwargs["data_files"].items()}
    return datasets.load_dataset("json", data_files=files)
'''


class ExportFormat(StrEnum):
    """What `goldenset export` writes."""

    JSONL = "jsonl"
    PARQUET = "parquet"
    LM_EVAL = "lm-eval"


def manifest_path(output: Path) -> Path:
    """Where the manifest of a JSONL or Parquet export written to `output` goes: beside it."""
    return output.with_name(f"{output.stem}.manifest.json")


def write_manifest(manifest: ReleaseManifest, path: Path) -> None:
    """The release's manifest as JSON (roots, counts, every item's split and digest)."""
    path.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")


def write_jsonl(lines: Iterable[str], output: Path) -> int:
    """The export lines as they come (each one canonical JSON ending in a newline); returns the count."""
    count = 0
    with output.open("w", encoding="utf-8", newline="\n") as handle:
        for line in lines:
            handle.write(line)
            count += 1
    return count


def _parquet_schema() -> Any:
    import pyarrow as pa

    metadata = pa.struct([("canary", pa.string()), ("eval", pa.string()), ("release", pa.int64()), ("item", pa.string())])
    text = ("source", "external_id", "occurred_at", "title", "input", "reference")
    columns = [("id", pa.int64()), *((name, pa.string()) for name in text), ("tags", pa.list_(pa.string()))]
    return pa.schema([*columns, ("split", pa.string()), ("content_digest", pa.string()), ("metadata", metadata)])


def write_parquet(lines: Iterable[str], output: Path) -> int:
    """The export rows as one Parquet file with a fixed schema (the same columns and values as the
    JSONL rows); returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _parquet_schema()
    rows = [json.loads(line) for line in lines]
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, output)
    return len(rows)


def lm_eval_task_name(manifest: ReleaseManifest, split: str) -> str:
    """`goldenset_<eval>_r<release>_<split>`, in the letters lm-eval task names allow."""
    return re.sub(r"[^a-z0-9_]", "_", f"goldenset_{manifest.eval}_r{manifest.number}_{split}".lower())


def lm_eval_config(task: str, data_file: str, manifest: ReleaseManifest) -> str:
    """The task's YAML: free-text generation on `input`, compared with the `reference` by BLEU and
    exact match (both computed offline). The loader reads the rows beside the YAML."""
    lines = [
        f"# goldenset {manifest.eval}, release {manifest.number} ({manifest.period_start:%Y-%m-%d} to {manifest.period_end:%Y-%m-%d}).",
        f"# {manifest.canary}",
        "# Every row carries this canary in metadata.canary; the release's manifest is manifest.json.",
        f"task: {task}",
        "custom_dataset: !function utils.load_rows",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {data_file}",
        "test_split: test",
        "output_type: generate_until",
        'doc_to_text: "{{input}}"',
        'doc_to_target: "{{reference}}"',
        "generation_kwargs:",
        "  until: []",
        "  max_gen_toks: 512",
        "  do_sample: false",
        "metric_list:",
        "  - metric: bleu",
        "    aggregation: bleu",
        "    higher_is_better: true",
        "  - metric: exact_match",
        "    aggregation: mean",
        "    higher_is_better: true",
        "    ignore_case: true",
        "    ignore_punctuation: true",
        "metadata:",
        f"  version: {manifest.number}",
        f"  eval: {json.dumps(manifest.eval)}",
        f"  release: {manifest.number}",
    ]
    return "\n".join(lines) + "\n"


def write_lm_eval(lines: Iterable[str], folder: Path, manifest: ReleaseManifest, split: str) -> tuple[str, int]:
    """An lm-evaluation-harness task folder: `<task>.yaml`, `<split>.jsonl` (the export rows),
    `utils.py` (the loader that finds the rows beside the YAML) and `manifest.json`. Run it with
    `lm_eval --tasks <task> --include_path <folder> ...`. Returns the task name and row count."""
    folder.mkdir(parents=True, exist_ok=True)
    task = lm_eval_task_name(manifest, split)
    data_file = f"{split}.jsonl"
    count = write_jsonl(lines, folder / data_file)
    (folder / f"{task}.yaml").write_text(lm_eval_config(task, data_file, manifest), encoding="utf-8")
    (folder / "utils.py").write_text(LM_EVAL_LOADER, encoding="utf-8")
    write_manifest(manifest, folder / "manifest.json")
    return task, count
