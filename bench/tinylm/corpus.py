"""The bench's data: one pool of dated records as the probed items, cut into exposure groups,
bands and near duplicates, and background text from the other data sets of `../shared/data` (never
the pool's).

Two pools (`POOLS`), so that what was designed on one is also measured on one nobody tuned on:
- `kev`: CISA KEV records, an item's text what the example mapping
  (`examples/mappings/cisa_kev.yaml`) makes its input, `{vendorProject} {product}:
  {shortDescription}`, dated by `dateAdded`; records longer than a training block are left out.
- `hadoop`: Apache Hadoop Jira reports (GitBugs), an item's text the start of what
  `examples/mappings/hadoop_jira.yaml` makes its input (title, then description), as many whole
  words as fit one training block, dated by `created`.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from curation.evidence.clean_band import DatedText, near_any
from schemas.evidence import ProbeItem, cutoff_instant

GROUPS = (1, 3, 10, 30)
"""How many times model C sees each exposure group's items in training."""

Fits = Callable[[str], bool]
"""Whether a text fits one training block (with the tokens around it)."""


@dataclass(frozen=True)
class PoolItem:
    item_id: str
    occurred_at: datetime
    text: str

    def dated(self) -> DatedText:
        return DatedText(item_id=self.item_id, text=self.text, occurred_at=self.occurred_at)

    def probe_item(self) -> ProbeItem:
        return ProbeItem(item_id=self.item_id, occurred_at=self.occurred_at, text=self.text)


def _midnight(day: str) -> datetime:
    return datetime.combine(date.fromisoformat(day[:10]), datetime.min.time(), tzinfo=UTC)


def _kev_records(data: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads((data / "cisa_kev" / "known_exploited_vulnerabilities.json").read_text())["vulnerabilities"]
    return records


def _hadoop_reports(data: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (data / "gitbugs_hadoop" / "reports.jsonl").read_text().splitlines()]


def _headlines(data: Path) -> list[str]:
    pairs = [json.loads(line) for line in (data / "sts_headlines" / "pairs.jsonl").read_text().splitlines()]
    return [f"{pair['s1']}\n{pair['s2']}" for pair in pairs]


def kev_items(data: Path, fits: Fits) -> list[PoolItem]:
    """The KEV records as items, oldest first; those that do not fit a training block are left out."""
    items = []
    for record in _kev_records(data):
        text = " ".join(f"{record['vendorProject']} {record['product']}: {record['shortDescription']}".split())
        if fits(text):
            items.append(PoolItem(item_id=record["cveID"], occurred_at=_midnight(record["dateAdded"]), text=text))
    return sorted(items, key=lambda item: (item.occurred_at, item.item_id))


def fitted_start(text: str, fits: Fits) -> str:
    """The longest run of `text`'s first words that `fits` (at least the first word)."""
    words = text.split()
    low, high = 1, len(words)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(" ".join(words[:middle])):
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low])


def hadoop_items(data: Path, fits: Fits) -> list[PoolItem]:
    """The Hadoop Jira reports as items, oldest first: title then description, whitespace
    collapsed, cut to the words that fit a training block (a report is often longer than one)."""
    items = []
    for report in _hadoop_reports(data):
        text = fitted_start(f"{report['title']} {report.get('description') or ''}", fits)
        created = datetime.fromisoformat(report["created"])
        occurred_at = created.replace(tzinfo=UTC) if created.tzinfo is None else created.astimezone(UTC)
        items.append(PoolItem(item_id=str(report["id"]), occurred_at=occurred_at, text=text))
    return sorted(items, key=lambda item: (item.occurred_at, item.item_id))


def _kev_background(data: Path) -> list[str]:
    return [" ".join(f"{record['vendorProject']} {record['product']}: {record['shortDescription']} {record['requiredAction']}".split()) for record in _kev_records(data)]


def _hadoop_background(data: Path, description_chars: int = 800) -> list[str]:
    texts = []
    for report in _hadoop_reports(data):
        description = " ".join((report.get("description") or "").split())[:description_chars]
        texts.append(f"{report['title']}\n{description}".strip())
    return texts


@dataclass(frozen=True)
class Pool:
    """A pool of probed items: how its items are read, what the probe's prompt calls it, the
    background's sources (never the pool itself), the bench's cutoff and the range of quarterly
    cutoffs of the clean models' temporal splits."""

    name: str
    dataset: str
    split: str
    items: Callable[[Path, Fits], list[PoolItem]]
    background: tuple[Callable[[Path], list[str]], ...]
    cutoff: date
    first_cutoff: date
    last_cutoff: date


POOLS = {
    "kev": Pool("kev", "CISA KEV", "catalog", kev_items, (_hadoop_background, _headlines), date(2024, 1, 1), date(2022, 1, 1), date(2025, 1, 1)),
    "hadoop": Pool("hadoop", "Apache Hadoop Jira", "bugs", hadoop_items, (_kev_background, _headlines), date(2023, 1, 1), date(2021, 1, 1), date(2024, 1, 1)),
}


def background_texts(data: Path, *, pool: str = "kev", max_chars: int) -> list[str]:
    """Documents of background text from the sources of `POOLS[pool]` (never the pool's own), in
    a fixed order, cut at `max_chars` characters in all. For `kev`: Hadoop Jira reports (title and
    the start of the description) and STS news headlines; for `hadoop`: KEV records (with their
    required action) and the headlines."""
    texts: list[str] = []
    for source in POOLS[pool].background:
        texts += source(data)
    random.Random(7).shuffle(texts)
    kept, total = [], 0
    for text in texts:
        if total >= max_chars:
            break
        kept.append(text)
        total += len(text)
    return kept


def near_exposed(exposed: Sequence[PoolItem], candidates: Sequence[PoolItem]) -> set[str]:
    """The ids of `candidates` that are near duplicates of an exposed item, by the product's clean
    band (`curation.evidence.clean_band.near_any`: exact after normalisation, or MinHash at the
    dedup's recall-first link level)."""
    if not exposed or not candidates:
        return set()
    found = near_any([item.dated() for item in candidates], [item.dated() for item in exposed])
    return set(found)


@dataclass
class Design:
    """Who is what: `groups` (exposure count → items C sees that many times), `unexposed`
    pre-cutoff items no model saw, `control` items dated on or after the cutoff, and `twins`
    (id → the band it was removed from) left out because they nearly copy an exposed item; the
    items are of `POOLS[pool]`."""

    cutoff: date
    groups: dict[int, list[PoolItem]]
    unexposed: list[PoolItem]
    control: list[PoolItem]
    twins: dict[str, str] = field(default_factory=dict)
    pool: str = "kev"

    def key(self) -> str:
        """A short fingerprint of the pool and who is exposed how often (the models' cache key)."""
        exposures = sorted((item.item_id, count) for count in GROUPS for item in self.groups[count])
        named = [] if self.pool == "kev" else [self.pool]
        return hashlib.sha256(json.dumps([*named, self.cutoff.isoformat(), exposures]).encode()).hexdigest()[:10]

    @property
    def source(self) -> Pool:
        return POOLS[self.pool]

    def exposed(self) -> list[PoolItem]:
        return [item for count in GROUPS for item in self.groups[count]]

    def probed(self) -> list[PoolItem]:
        """Every item the bench probes: the exposure groups, the unexposed items, the control band."""
        return [*self.exposed(), *self.unexposed, *self.control]

    def band_of(self) -> dict[str, str]:
        bands = {item.item_id: f"{count}x" for count in GROUPS for item in self.groups[count]}
        bands.update({item.item_id: "unexposed" for item in self.unexposed})
        bands.update({item.item_id: "control" for item in self.control})
        return bands


def design(items: Sequence[PoolItem], *, cutoff: date, per_group: int, seed: int, chunk: int = 60, pool: str = "kev") -> Design:
    """Draw `per_group` exposed items per group from the pre-cutoff items in a seeded random order,
    no two of them near duplicates of each other (so that one group's items are not another's in
    disguise: a candidate near an item already drawn, or near another candidate of its chunk of
    `chunk`, is passed over), then leave every near duplicate of an exposed item out of the
    unexposed and control bands (`near_exposed`)."""
    instant = cutoff_instant(cutoff)
    before = [item for item in items if item.occurred_at < instant]
    after = [item for item in items if item.occurred_at >= instant]
    order = list(before)
    random.Random(seed).shuffle(order)
    wanted = per_group * len(GROUPS)
    chosen: list[PoolItem] = []
    for start in range(0, len(order), chunk):
        if len(chosen) >= wanted:
            break
        batch = order[start : start + chunk]
        taken = near_exposed(chosen, batch)
        batch = [item for item in batch if item.item_id not in taken]
        crowded = set(near_any([item.dated() for item in batch], [item.dated() for item in batch])) if len(batch) > 1 else set()
        chosen += [item for item in batch if item.item_id not in crowded]
    if len(chosen) < wanted:
        raise ValueError(f"only {len(chosen)} distinct pre-cutoff items for {len(GROUPS)} groups of {per_group}")
    chosen = chosen[:wanted]
    groups = {count: chosen[index * per_group : (index + 1) * per_group] for index, count in enumerate(GROUPS)}
    exposed_ids = {item.item_id for item in chosen}
    rest = [item for item in before if item.item_id not in exposed_ids]
    removed = near_exposed(chosen, rest + after)
    unexposed = [item for item in rest if item.item_id not in removed]
    control = [item for item in after if item.item_id not in removed]
    twin_band = {item.item_id: ("unexposed" if item.occurred_at < instant else "control") for item in rest + after if item.item_id in removed}
    return Design(cutoff=cutoff, groups=groups, unexposed=unexposed, control=control, twins=twin_band, pool=pool)
