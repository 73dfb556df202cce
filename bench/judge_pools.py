"""Labelled pairs for the same-incident judge, from the pools in ../shared/data, and the vectors
their texts need (cached on disk by text hash, so a rerun encodes nothing).

Each pool yields `Pair`s (two records, a label, the pool's name and where the label came from)
and its candidate pairs: each record with its nearest earlier record by body cosine, which is
what curation would put to the judge; they carry no label and measure how many pairs a pool sends
to the "ask a curator" band. The label rules are in `curation/dedup/judge/DATA_CARD.md`.
Everything is deterministic: records are read in file order and samples are drawn with fixed seeds.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.cluster.hierarchy import DisjointSet

from bench.common import DATA, ROOT
from curation.dedup.boilerplate import CommonLines, common_lines
from curation.dedup.embeddings import body_text, text_hash, title_text
from curation.dedup.pair_features import PairText

LABELS = ROOT / "bench" / "labels"
POOLS_DIR = ROOT / "bench" / "pools"
CACHE = ROOT / "var" / "judge-vectors"
LOGHUB_SYSTEMS = ("Android", "BGL", "HDFS", "HPC", "Linux", "OpenStack", "Spark", "Windows")
LOGHUB_SAMPLE = 200  # lines per system (the encoding stays bounded)
NEIGHBOUR_NEGATIVES = 250  # unlinked nearest earlier neighbours drawn per pool of reports


@dataclass(frozen=True)
class Record:
    key: str
    text: PairText


@dataclass(frozen=True)
class Pair:
    pool: str
    a: str  # record keys: `a` the later record
    b: str
    label: int  # 1 same incident, 0 not
    origin: str  # where the label came from


@dataclass
class Pool:
    name: str
    records: dict[str, Record]
    pairs: list[Pair]
    candidates: list[tuple[str, str]] = field(default_factory=list)
    common: CommonLines = field(default_factory=CommonLines)


class VectorCache:
    """Body and title vectors and unreadable shares by text hash, for one model, kept under `var/`."""

    def __init__(self, encoder: object | None, model_id: str) -> None:
        self.encoder = encoder
        self.folder = CACHE / model_id.replace("/", "_").replace("@", "-")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.vectors: dict[str, NDArray[np.float32]] = {}
        self.unreadable: dict[str, float | None] = {}
        index_file = self.folder / "keys.json"
        if index_file.is_file():
            keys = json.loads(index_file.read_text())
            matrix = np.load(self.folder / "vectors.npy")
            shares = json.loads((self.folder / "unreadable.json").read_text())
            self.vectors = {key: matrix[row] for row, key in enumerate(keys)}
            self.unreadable = {key: shares.get(key) for key in keys}

    def _save(self) -> None:
        keys = list(self.vectors)
        np.save(self.folder / "vectors.npy.tmp.npy", np.vstack([self.vectors[key] for key in keys]).astype(np.float32))
        (self.folder / "vectors.npy.tmp.npy").replace(self.folder / "vectors.npy")
        (self.folder / "unreadable.json").write_text(json.dumps(self.unreadable))
        (self.folder / "keys.json").write_text(json.dumps(keys))

    def ensure(self, texts: Iterable[str], *, chunk: int = 128, progress: bool = True) -> None:
        """Encode the texts not cached yet, a chunk at a time, saving after each chunk."""
        missing: dict[str, str] = {}
        for text in texts:
            key = text_hash(text)
            if key not in self.vectors:
                missing[key] = text
        if not missing:
            return
        if self.encoder is None:
            raise RuntimeError(f"{len(missing)} texts are not encoded yet: run with the model (not --cached-only)")
        items = sorted(missing.items(), key=lambda item: len(item[1]))
        for start in range(0, len(items), chunk):
            part = items[start : start + chunk]
            vectors = self.encoder.encode([text for _, text in part])  # type: ignore[attr-defined]
            shares = self.encoder.unreadable([text for _, text in part])  # type: ignore[attr-defined]
            for (key, _), vector, share in zip(part, vectors, shares, strict=True):
                self.vectors[key] = np.asarray(vector, dtype=np.float32)
                self.unreadable[key] = share
            self._save()
            if progress:
                print(f"  encoded {min(start + chunk, len(items))}/{len(items)}", flush=True)

    def vector(self, text: str) -> NDArray[np.float32]:
        return self.vectors[text_hash(text)]

    def share(self, text: str) -> float | None:
        return self.unreadable.get(text_hash(text))


def texts_of(record: Record) -> tuple[str, str]:
    """The body and title texts curation embeds for a record."""
    return body_text(record.text.title, record.text.input), title_text(record.text.title, record.text.input)


def _nearest_earlier(order: Sequence[str], matrix: NDArray[np.float32], allowed: NDArray[np.bool_] | None = None) -> list[int | None]:
    """For each record (rows in `order`), the row of its most similar earlier record (None for the first)."""
    similarity = matrix @ matrix.T
    found: list[int | None] = []
    for row in range(len(order)):
        if row == 0:
            found.append(None)
            continue
        scores = similarity[row, :row].copy()
        if allowed is not None:
            scores[~allowed[row, :row]] = -np.inf
        best = int(np.argmax(scores))
        found.append(best if np.isfinite(scores[best]) else None)
    return found


def neighbour_negatives(
    order: Sequence[str], nearest: Sequence[int | None], excluded: Callable[[str, str], bool], *, limit: int = NEIGHBOUR_NEGATIVES, seed: int = 28
) -> list[tuple[str, str]]:
    """Up to `limit` pairs (record, its nearest earlier record) for records drawn in an order fixed by
    `seed`, leaving out pairs `excluded(later, earlier)` refuses (linked, already labelled ...)."""
    found: list[tuple[str, str]] = []
    for row in random.Random(seed).sample(range(1, len(order)), len(order) - 1):
        other = nearest[row]
        if len(found) >= limit:
            break
        if other is None or excluded(order[row], order[other]):
            continue
        found.append((order[row], order[other]))
    return found


def body_matrix(records: Sequence[Record], cache: VectorCache) -> NDArray[np.float32]:
    return np.vstack([cache.vector(texts_of(record)[0]) for record in records]).astype(np.float32)


def _date(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def hadoop_records() -> dict[str, Record]:
    records: dict[str, Record] = {}
    with (DATA / "gitbugs_hadoop" / "reports.jsonl").open() as lines:
        for line in lines:
            report = json.loads(line)
            title = (report.get("title") or "").strip()
            body = f"{title}\n\n{report.get('description') or ''}".strip()
            fields = {name: str(report.get(name) or "") for name in ("priority", "affects_versions")}
            records[report["id"]] = Record(report["id"], PairText(title, body, _date(report.get("created")), fields))
    return records


def hadoop(cache: VectorCache) -> Pool:
    """Maintainer-linked duplicates (same), blind-read labels (same vs related/different), and
    nearest earlier neighbours that no one linked (not same; about 6% may be unlinked duplicates)."""
    records = hadoop_records()
    resolutions = {}
    with (DATA / "gitbugs_hadoop" / "reports.jsonl").open() as lines:
        for line in lines:
            report = json.loads(line)
            resolutions[report["id"]] = report.get("resolution")
    pairs: list[Pair] = []
    seen: set[frozenset[str]] = set()

    def add(a: str, b: str, label: int, origin: str) -> None:
        key = frozenset((a, b))
        if a in records and b in records and a != b and key not in seen:
            seen.add(key)
            later, earlier = sorted((a, b), key=lambda k: records[k].text.occurred_at or datetime.min, reverse=True)
            pairs.append(Pair("gitbugs_hadoop", later, earlier, label, origin))

    with (DATA / "gitbugs_hadoop" / "near_pairs_labelled.jsonl").open() as lines:
        for line in lines:
            row = json.loads(line)
            add(row["a_id"], row["b_id"], int(row["label"] == "same"), "read: near pairs (shared data)")
    for name in ("gitbugs_neighbours.jsonl", "gitbugs_decisions_read.jsonl"):
        with (LABELS / name).open() as lines:
            for line in lines:
                row = json.loads(line)
                add(row["later_id"], row["earlier_id"], int(row["label"] == "same"), f"read: {name}")
    linked: set[frozenset[str]] = set()
    with (DATA / "gitbugs_hadoop" / "dup_pairs.jsonl").open() as lines:
        for line in lines:
            row = json.loads(line)
            linked.add(frozenset((row["a_id"], row["b_id"])))
            add(row["a_id"], row["b_id"], 1, "maintainer-linked duplicate")
    order = sorted(records, key=lambda key: (records[key].text.occurred_at or datetime.min, key))
    ordered = [records[key] for key in order]
    cache.ensure(text for record in ordered for text in texts_of(record))
    nearest = _nearest_earlier(order, body_matrix(ordered, cache))
    candidates = [(order[row], order[other]) for row, other in enumerate(nearest) if other is not None]
    for a, b in neighbour_negatives(order, nearest, lambda a, b: frozenset((a, b)) in linked or frozenset((a, b)) in seen or "Duplicate" in (resolutions[a], resolutions[b])):
        add(a, b, 0, "unlinked nearest earlier neighbour")
    common = common_lines(record.text.input for record in ordered)
    return Pool("gitbugs_hadoop", records, pairs, candidates, common)


def _groups(links: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each linked key's group (connected components of the links), named by its smallest key."""
    disjoint: DisjointSet[str] = DisjointSet()
    for a, b in links:
        disjoint.add(a)
        disjoint.add(b)
        disjoint.merge(a, b)
    return {key: min(subset) for subset in disjoint.subsets() for key in subset}


def firefox(cache: VectorCache) -> Pool:
    """Mozilla Firefox Bugzilla reports that take part in a maintainer's duplicate link
    (bench/pools/firefox_dups): every report with its nearest earlier report (smaller bug id) by body
    cosine, the pair curation would put to the judge, is same when the two are in one duplicate
    group (connected components of the links) and not same otherwise. The source's own linked
    pairs are not used as such: half of them were picked for being textually dissimilar. No dates."""
    folder = POOLS_DIR / "firefox_dups"
    records: dict[str, Record] = {}
    with (folder / "reports.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            report = json.loads(line)
            key = f"ff{report['id']}"
            title = report["summary"]
            records[key] = Record(key, PairText(title, f"{title}\n\n{report['description']}".strip()))
    links: list[tuple[str, str]] = []
    with (folder / "dup_links.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            links.append((f"ff{row['duplicate_id']}", f"ff{row['master_id']}"))
    group = _groups(links)
    order = sorted(records, key=lambda key: int(key[2:]))  # Bugzilla ids grow with the filing date
    ordered = [records[key] for key in order]
    cache.ensure(text for record in ordered for text in texts_of(record))
    nearest = _nearest_earlier(order, body_matrix(ordered, cache))
    candidates = [(order[row], order[other]) for row, other in enumerate(nearest) if other is not None]
    pairs = [
        Pair("firefox_dups", a, b, 1, "nearest earlier report, same duplicate group")
        if group[a] == group[b]
        else Pair("firefox_dups", a, b, 0, "nearest earlier report, another duplicate group")
        for a, b in candidates
    ]
    return Pool("firefox_dups", records, pairs, candidates, common_lines(record.text.input for record in ordered))


def sentence_pool(name: str, rows: Iterable[tuple[str, str, int | None, str]]) -> Callable[[VectorCache], Pool]:
    """A pool of sentence pairs (`rows`: later sentence, earlier sentence, label or None to leave the
    pair out, origin), one untitled record per distinct sentence; candidates as for every pool."""

    def build(cache: VectorCache) -> Pool:
        records: dict[str, Record] = {}
        keys: dict[str, str] = {}
        pairs: list[Pair] = []

        def record(sentence: str) -> str:
            sentence = sentence.strip()
            if sentence not in keys:
                keys[sentence] = f"{name}:{len(keys)}"
                records[keys[sentence]] = Record(keys[sentence], PairText("", sentence))
            return keys[sentence]

        for later, earlier, label, origin in rows:
            a, b = record(later), record(earlier)
            if a != b and label is not None:
                pairs.append(Pair(name, a, b, label, origin))
        order = list(records)
        ordered = [records[key] for key in order]
        cache.ensure(text for record_ in ordered for text in texts_of(record_))
        nearest = _nearest_earlier(order, body_matrix(ordered, cache))
        candidates = [(order[row], order[other]) for row, other in enumerate(nearest) if other is not None]
        return Pool(name, records, pairs, candidates, common_lines(record_.text.input for record_ in ordered))

    return build


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _graded(score: float) -> tuple[int | None, str]:
    """The STS rule: 4.8 and above same, 2 and below not same (pairs built because they are alike),
    in between left out."""
    return (1, "STS score >= 4.8") if score >= 4.8 else (0, "STS score <= 2") if score <= 2 else (None, "")


def sts(cache: VectorCache) -> Pool:
    """News headlines (SemEval STS, ../shared/data): `_graded`."""
    rows = [(row["s2"], row["s1"], *_graded(row["score"])) for row in _jsonl(DATA / "sts_headlines" / "pairs.jsonl")]
    return sentence_pool("sts_headlines", rows)(cache)


def stsb_ru(cache: VectorCache) -> Pool:
    """Russian STS-B, machine-translated (bench/pools/stsb_ru): `_graded`."""
    rows = [(row["s2"], row["s1"], *_graded(row["score"])) for row in _jsonl(POOLS_DIR / "stsb_ru" / "pairs.jsonl")]
    return sentence_pool("stsb_ru", rows)(cache)


def pawsx_de(cache: VectorCache) -> Pool:
    """German PAWS-X (human-translated dev split, bench/pools/pawsx_de): label 1 (paraphrase) same,
    0 not same. The pairs were built to share most words, so "not same" here is a hard negative."""
    rows = [(row["s2"], row["s1"], int(row["label"]), f"PAWS-X label {row['label']}") for row in _jsonl(POOLS_DIR / "pawsx_de" / "pairs.jsonl")]
    return sentence_pool("pawsx_de", rows)(cache)


def loghub(cache: VectorCache) -> Pool:
    """Log lines: the nearest earlier sampled line of the same EventId (same), and the nearest
    earlier sampled line of another EventId (not same), per system."""
    records: dict[str, Record] = {}
    pairs: list[Pair] = []
    candidates: list[tuple[str, str]] = []
    events: dict[str, str] = {}
    for system in LOGHUB_SYSTEMS:
        with (DATA / "loghub_2k" / system / f"{system}_2k.log_structured.csv").open(newline="", encoding="utf-8", errors="replace") as handle:
            rows = list(csv.DictReader(handle))
        chosen = sorted(random.Random(f"loghub-{system}").sample(range(len(rows)), LOGHUB_SAMPLE))
        order: list[str] = []
        for row_number in chosen:
            line = rows[row_number]
            key = f"{system}:{line['LineId']}"
            fields = {name.lower(): line[name] for name in ("Component", "Level") if line.get(name)}
            records[key] = Record(key, PairText("", line["Content"], None, fields))
            events[key] = line["EventId"]
            order.append(key)
        ordered = [records[key] for key in order]
        cache.ensure(text for record in ordered for text in texts_of(record))
        matrix = body_matrix(ordered, cache)
        labels = np.array([events[key] for key in order])
        same = labels[:, None] == labels[None, :]
        for row, other in enumerate(_nearest_earlier(order, matrix, same)):
            if other is not None:
                pairs.append(Pair("loghub_2k", order[row], order[other], 1, "same EventId"))
        for row, other in enumerate(_nearest_earlier(order, matrix, ~same)):
            if other is not None:
                pairs.append(Pair("loghub_2k", order[row], order[other], 0, "nearest line of another EventId"))
        candidates += [(order[row], order[other]) for row, other in enumerate(_nearest_earlier(order, matrix)) if other is not None]
    return Pool("loghub_2k", records, pairs, candidates, common_lines(record.text.input for record in records.values()))


def cisa_kev(cache: VectorCache) -> Pool:
    """Known exploited vulnerabilities: every CVE is its own record, so every pair is not same:
    all pairs within the 57 groups sharing a shortDescription, and unlinked nearest earlier neighbours."""
    document = json.loads((DATA / "cisa_kev" / "known_exploited_vulnerabilities.json").read_text())
    records: dict[str, Record] = {}
    groups: dict[str, list[str]] = {}
    for entry in document["vulnerabilities"]:
        text = f"{entry['vendorProject']} {entry['product']}: {entry['shortDescription']}"
        fields = {"vendor": entry["vendorProject"], "product": entry["product"]}
        records[entry["cveID"]] = Record(entry["cveID"], PairText(entry["vulnerabilityName"], text, _date(entry["dateAdded"]), fields))
        groups.setdefault(entry["shortDescription"], []).append(entry["cveID"])
    order = sorted(records, key=lambda key: (records[key].text.occurred_at or datetime.min, key))
    position = {key: row for row, key in enumerate(order)}
    pairs: list[Pair] = []
    seen: set[frozenset[str]] = set()
    for members in groups.values():
        members = sorted(members, key=position.__getitem__)
        for later in range(len(members)):
            for earlier in range(later):
                seen.add(frozenset((members[later], members[earlier])))
                pairs.append(Pair("cisa_kev", members[later], members[earlier], 0, "same shortDescription, another CVE"))
    ordered = [records[key] for key in order]
    cache.ensure(text for record in ordered for text in texts_of(record))
    nearest = _nearest_earlier(order, body_matrix(ordered, cache))
    candidates = [(order[row], order[other]) for row, other in enumerate(nearest) if other is not None]
    for a, b in neighbour_negatives(order, nearest, lambda a, b: frozenset((a, b)) in seen):
        pairs.append(Pair("cisa_kev", a, b, 0, "nearest earlier neighbour, another CVE"))
    return Pool("cisa_kev", records, pairs, candidates, common_lines(record.text.input for record in ordered))


POOLS = {
    "gitbugs_hadoop": hadoop,
    "sts_headlines": sts,
    "firefox_dups": firefox,
    "stsb_ru": stsb_ru,
    "pawsx_de": pawsx_de,
    "loghub_2k": loghub,
    "cisa_kev": cisa_kev,
}
