"""Re-derive `livecodebench_codegen.csv.gz` (and its item table) from a git snapshot of
github.com/LiveCodeBench/livecodebench.github.io.

    .venv/bin/python bench/data/per_item_results/derive.py PATH_TO_SNAPSHOT [--out-dir DIR] [--scan]

PATH_TO_SNAPSHOT is a clone (bare or with a work tree) of that repository. The leaderboard site
keeps its code-generation results in `src/mocks/performances_generation.json`: one record per
(model, problem) with the problem's contest date and the model's pass@1 in percent. The site shows
only the models of its current view, so one version of the file does not hold every model the
leaderboard ever had; this script merges the versions in the file's history:

1. the versions are those of the commits in `PINNED_COMMITS` (with `--scan`: every commit of the
   file's history on HEAD whose version is present in the snapshot and lists its models);
2. the items are the problems of the newest version, dated by that version's contest date (UTC);
   every older version used holds a subset of them (the file's very first version, of 2024-03-12,
   had a partly different problem set and no `models` list, and is not used);
3. a model is identified by its `model_name` (the API or Hugging Face id in the file's `models`
   list), so a model renamed on the site counts once; each model's scores all come from the newest
   version that has it, under that version's display name (`model_repr`);
4. score = pass@1 / 100, in [0, 1].

Only the standard library. Prints the counts that the README quotes.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gzip
import io
import json
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SOURCE_PATH = "src/mocks/performances_generation.json"

PINNED_COMMITS = (
    # Every version of SOURCE_PATH on HEAD's history (HEAD = f186ab5041d6b768733b8ae8145151c867942134)
    # that the snapshot holds and that lists its models; the snapshot lacked the others (it leaves
    # out files of 4 MiB and more).
    "550a70889c9f347d32754f6218c18c797295c420",  # 2024-03-12
    "d2256292b73261af2847783551a22ff880c46864",  # 2024-03-17
    "1568d94d13ea49f17e1e35226669ebdefd6f371c",  # 2024-03-18
    "549c1863b6f30caa67b100096cfc11421eaa0ef2",  # 2024-03-19
    "708762c29a6479c0062eda7ed8609063710bba5a",  # 2024-03-31
    "86b8181b482fa2b44b2bb82abe481948ffe2ed03",  # 2024-03-31
    "44ecb7d74a8ce27b465e131d1a113e32e90c1156",  # 2024-04-03
    "56e9a16aa0c15f0449052e43145b9ae4eff2087a",  # 2024-04-08
    "e8e0a786af6412022a7dccead6114cc7b4e37c32",  # 2024-04-09
    "9c7c6ca4630696592aa8fa500e5e9d4d82ff465c",  # 2024-04-10
    "3812fa4e0660268f7fac5a40c90f5a0619310dbb",  # 2024-04-10
    "bf5797cc4639ad8d66aa35665d3ada07f819ad41",  # 2024-04-12
    "4d1fbb191a0b03060338a9231f6b50f5aa4f8be8",  # 2024-04-16
    "dd4bb0c466ae95ad891d6417f16b9eef488b73f6",  # 2024-04-16
    "4c1bc38cd76bc7ddd33e35ad0f5fbf0ec9f78fe8",  # 2024-04-16
    "29abbd6bf0b90a00f505fb777eb623573789f988",  # 2024-04-17
    "8ed5690cdc26265076a803380e84f5c5848a0ce1",  # 2024-04-17
    "d41dc90f738cef31df03dfbfe48c1daf024abe24",  # 2025-01-15
    "33505c076467ba6e4acaa8fad8a29dcc75ec65ce",  # 2025-01-15
    "83b6481b4890c4951730f53bdde815b25e0f7f3a",  # 2025-04-22
)

RESULTS_NAME = "livecodebench_codegen.csv.gz"
ITEMS_NAME = "livecodebench_codegen_items.csv.gz"


@dataclass(frozen=True)
class Version:
    commit: str
    day: str
    data: dict


class Snapshot:
    def __init__(self, path: Path) -> None:
        git = shutil.which("git")
        if git is None:
            sys.exit("git is needed on PATH")
        self.git = git
        self.path = path

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([self.git, "-C", str(self.path), *args], capture_output=True, check=check)  # noqa: S603 (fixed git arguments)

    def day(self, commit: str) -> str:
        return self.run("log", "-1", "--format=%cs", commit).stdout.decode().strip()

    def version(self, commit: str) -> Version | None:
        """The file at `commit`, or None where the snapshot lacks its blob."""
        found = self.run("rev-parse", "--verify", "--quiet", f"{commit}:{SOURCE_PATH}", check=False)
        if found.returncode:
            return None
        blob = found.stdout.decode().strip()
        if self.run("cat-file", "-e", blob, check=False).returncode:
            return None
        return Version(commit, self.day(commit), json.loads(self.run("cat-file", "blob", blob).stdout))

    def history(self) -> list[str]:
        out = self.run("log", "--reverse", "--format=%H", "HEAD", "--", SOURCE_PATH).stdout.decode()
        return out.split()


def load_versions(snapshot: Snapshot, scan: bool) -> list[Version]:
    versions = []
    for commit in snapshot.history() if scan else PINNED_COMMITS:
        version = snapshot.version(commit)
        if version is None:
            if not scan:
                sys.exit(f"the snapshot lacks {SOURCE_PATH} at {commit}")
            continue
        if "models" in version.data:  # the first version has none
            versions.append(version)
    if not versions:
        sys.exit(f"no usable version of {SOURCE_PATH}")
    return versions


def to_day(epoch_ms: int) -> str:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC).date().isoformat()


def score_text(pass_at_1: float) -> str:
    return f"{pass_at_1 / 100:.4f}".rstrip("0").rstrip(".")


def merge(versions: list[Version]) -> tuple[dict[str, dict], dict[str, dict]]:
    """Items of the newest version ({id: record}) and, per model id, the newest version's results
    ({model id: {"repr", "commit", "day", "scores": {item id: pass@1}}})."""
    newest = versions[-1].data["performances"]
    items = {str(p["question_id"]): {"date": to_day(p["date"]), "platform": p["platform"], "difficulty": p["difficulty"]} for p in newest}
    models: dict[str, dict] = {}
    for version in versions:
        name_of = {m["model_repr"]: m["model_name"] for m in version.data["models"]}
        per_model: dict[str, dict] = {}
        for p in version.data["performances"]:
            item = str(p["question_id"])
            if item not in items:
                continue
            model_id = name_of.get(p["model"], p["model"])
            entry = per_model.setdefault(model_id, {"repr": p["model"], "commit": version.commit, "day": version.day, "scores": {}})
            entry["scores"][item] = p["pass@1"]
        models.update(per_model)
    return items, models


def write_gzip_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as out:
        out.write(text.getvalue().encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot", type=Path, help="git directory or clone of LiveCodeBench/livecodebench.github.io")
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--scan", action="store_true", help="use every present version of the file on HEAD instead of the pinned commits")
    args = parser.parse_args()

    versions = load_versions(Snapshot(args.snapshot), args.scan)
    items, models = merge(versions)
    names = Counter(entry["repr"] for entry in models.values())
    duplicated = [name for name, count in names.items() if count > 1]
    if duplicated:
        sys.exit(f"display names shared by several models: {duplicated}")

    rows = []
    for entry in sorted(models.values(), key=lambda e: e["repr"]):
        for item, value in entry["scores"].items():
            rows.append([entry["repr"], item, items[item]["date"], score_text(value)])
    rows.sort(key=lambda r: (r[0], r[2], r[1]))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_gzip_csv(args.out_dir / RESULTS_NAME, ["model", "item_id", "item_date", "score"], rows)
    item_rows = sorted(([i, v["date"], v["platform"], v["difficulty"]] for i, v in items.items()), key=lambda r: (r[1], r[0]))
    write_gzip_csv(args.out_dir / ITEMS_NAME, ["item_id", "item_date", "platform", "difficulty"], item_rows)

    dates = sorted(v["date"] for v in items.values())
    cells = len(models) * len(items)
    print(f"versions used: {len(versions)} ({versions[0].commit[:12]} {versions[0].day} .. {versions[-1].commit[:12]} {versions[-1].day})")
    print(f"models: {len(models)}  items: {len(items)}  rows: {len(rows)}  dates: {dates[0]} .. {dates[-1]}")
    print(f"missing cells: {cells - len(rows)} of {cells} ({(cells - len(rows)) / cells:.1%})")
    scores = Counter(r[3] for r in rows)
    print(f"scores 0: {scores['0']}  1: {scores['1']}  strictly between: {len(rows) - scores['0'] - scores['1']}")
    print("items per month:", " ".join(f"{m}:{n}" for m, n in sorted(Counter(d[:7] for d in dates).items())))
    print("| model | id | items | last item | source commit (date) |")
    print("|---|---|---|---|---|")
    for model_id, entry in sorted(models.items(), key=lambda kv: (-len(kv[1]["scores"]), kv[1]["repr"])):
        last = max(items[i]["date"] for i in entry["scores"])
        print(f"| {entry['repr']} | `{model_id}` | {len(entry['scores'])} | {last} | `{entry['commit'][:12]}` ({entry['day']}) |")


if __name__ == "__main__":
    main()
