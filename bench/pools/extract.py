"""Writes the bounded samples under bench/pools/ from git snapshots of their public sources.

    PYTHONPATH=. python bench/pools/extract.py firefox_dups SNAPSHOT_GIT_DIR
    PYTHONPATH=. python bench/pools/extract.py pawsx_de SNAPSHOT_GIT_DIR
    PYTHONPATH=. python bench/pools/extract.py stsb_ru SNAPSHOT_GIT_DIR

SNAPSHOT_GIT_DIR is a git directory of the source repository (README.md of each pool names it and
its commit). Files are read with `git show HEAD:path`; sampling uses fixed seeds, so a rerun on the
same commit writes the same bytes.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAWSX_PAIRS = 800  # pairs drawn from the 2,000 of the German dev split (bounds the encoding)
STSB_DIFFERENT = 400  # pairs scored <= 2 drawn (every pair scored >= 4.8 is kept)


def _show(git_dir: str, path: str) -> str:
    command = ["git", "--git-dir", git_dir, "show", f"HEAD:{path}"]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout  # noqa: S603 (git, on a path given by hand)


def _first(cell: str) -> str:
    """The source stores each text as a Python list literal of one string."""
    try:
        value = ast.literal_eval(cell)
    except (ValueError, SyntaxError):
        return cell.strip()
    return (value[0] if isinstance(value, list) and value else str(value)).strip()


def firefox_dups(git_dir: str) -> None:
    reports: dict[int, dict[str, object]] = {}
    links: list[dict[str, object]] = []
    for kind in ("similar", "dissimilar"):
        text = _show(git_dir, f"Datatset_Firefox_Pair (trigram)/Firefox_textually_{kind}_pair.csv")
        for row in csv.DictReader(io.StringIO(text)):
            duplicate, master = int(float(row["Bug ID"])), int(float(row["Duplicate_Bug_Ids"]))
            for key, summary, description in ((duplicate, row["Summary1"], row["description1"]), (master, row["summary2"], row["description2"])):
                reports.setdefault(key, {"id": key, "summary": _first(summary), "description": _first(description)})
            links.append({"duplicate_id": duplicate, "master_id": master, "source_set": f"textually_{kind}"})
    out = HERE / "firefox_dups"
    out.mkdir(exist_ok=True)
    with (out / "reports.jsonl").open("w", encoding="utf-8") as handle:
        for key in sorted(reports):
            handle.write(json.dumps(reports[key], ensure_ascii=False) + "\n")
    with (out / "dup_links.jsonl").open("w", encoding="utf-8") as handle:
        for link in sorted(links, key=lambda item: (item["duplicate_id"], item["master_id"])):
            handle.write(json.dumps(link) + "\n")
    print(f"firefox_dups: {len(reports)} reports, {len(links)} links")


def pawsx_de(git_dir: str) -> None:
    rows = list(csv.DictReader(io.StringIO(_show(git_dir, "data/PAWSX/dev.tsv")), delimiter="\t", quoting=csv.QUOTE_NONE))
    rows = [row for row in rows if row["label"] in ("0", "1")]
    chosen = sorted(random.Random("pawsx-de").sample(range(len(rows)), PAWSX_PAIRS))
    out = HERE / "pawsx_de"
    out.mkdir(exist_ok=True)
    with (out / "pairs.jsonl").open("w", encoding="utf-8") as handle:
        for index in chosen:
            row = rows[index]
            handle.write(json.dumps({"id": int(row["id"]), "s1": row["sentence1"].strip(), "s2": row["sentence2"].strip(), "label": int(row["label"])}, ensure_ascii=False) + "\n")
    print(f"pawsx_de: {len(chosen)} of {len(rows)} pairs")


def stsb_ru(git_dir: str) -> None:
    """Russian STS-B (dev and test), without the pairs whose English original is in the
    sts_headlines pool (../shared/data), so holding that pool out holds out its translations too."""
    from bench.common import DATA

    headlines: set[str] = set()
    with (DATA / "sts_headlines" / "pairs.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            headlines.update((row["s1"].strip(), row["s2"].strip()))
    same, different, dropped = [], [], 0
    for split in ("dev", "test"):
        english = list(csv.reader(io.StringIO(_show(git_dir, f"data/stsb-en-{split}.csv"))))
        russian = list(csv.reader(io.StringIO(_show(git_dir, f"data/stsb-ru-{split}.csv"))))
        if len(english) != len(russian):
            raise SystemExit(f"{split}: {len(english)} English rows, {len(russian)} Russian")
        for number, (en, ru) in enumerate(zip(english, russian, strict=True)):
            if en[2] != ru[2]:
                raise SystemExit(f"{split} row {number}: scores differ ({en[2]} vs {ru[2]})")
            if en[0].strip() in headlines or en[1].strip() in headlines:
                dropped += 1
                continue
            row = {"id": f"{split}-{number}", "s1": ru[0].strip(), "s2": ru[1].strip(), "score": float(ru[2])}
            if row["score"] >= 4.8:
                same.append(row)
            elif row["score"] <= 2:
                different.append(row)
    chosen = same + random.Random("stsb-ru").sample(different, STSB_DIFFERENT)
    order = {row["id"]: index for index, row in enumerate(same + different)}
    out = HERE / "stsb_ru"
    out.mkdir(exist_ok=True)
    with (out / "pairs.jsonl").open("w", encoding="utf-8") as handle:
        for row in sorted(chosen, key=lambda item: order[item["id"]]):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"stsb_ru: {len(same)} pairs >= 4.8, {STSB_DIFFERENT} of {len(different)} pairs <= 2; {dropped} pairs of the headlines pool left out")


if __name__ == "__main__":
    {"firefox_dups": firefox_dups, "pawsx_de": pawsx_de, "stsb_ru": stsb_ru}[sys.argv[1]](sys.argv[2])
