"""The bench's data: CISA KEV records as the probed items, cut into exposure groups, bands and near
duplicates, and background text from the other data sets of `../shared/data` (never KEV).

An item's text is what the example mapping (`examples/mappings/cisa_kev.yaml`) makes its input:
`{vendorProject} {product}: {shortDescription}`, dated by `dateAdded`.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from curation.evidence.clean_band import DatedText, near_any
from schemas.evidence import ProbeItem, cutoff_instant

GROUPS = (1, 3, 10, 30)
"""How many times model C sees each exposure group's items in training."""


@dataclass(frozen=True)
class KevItem:
    item_id: str
    occurred_at: datetime
    text: str

    def dated(self) -> DatedText:
        return DatedText(item_id=self.item_id, text=self.text, occurred_at=self.occurred_at)

    def probe_item(self) -> ProbeItem:
        return ProbeItem(item_id=self.item_id, occurred_at=self.occurred_at, text=self.text)


def kev_items(data: Path, *, keep: Callable[[str], bool] = lambda text: True) -> list[KevItem]:
    """The KEV records as items, oldest first; `keep` drops those whose text it refuses (items
    longer than a training block)."""
    records = json.loads((data / "cisa_kev" / "known_exploited_vulnerabilities.json").read_text())["vulnerabilities"]
    items = []
    for record in records:
        text = " ".join(f"{record['vendorProject']} {record['product']}: {record['shortDescription']}".split())
        when = datetime.combine(date.fromisoformat(record["dateAdded"]), datetime.min.time(), tzinfo=UTC)
        if keep(text):
            items.append(KevItem(item_id=record["cveID"], occurred_at=when, text=text))
    return sorted(items, key=lambda item: (item.occurred_at, item.item_id))


def background_texts(data: Path, *, max_chars: int, description_chars: int = 800) -> list[str]:
    """Documents of background text, none from KEV: Hadoop Jira reports (title and the start of the
    description) and STS news headlines, in a fixed order, cut at `max_chars` characters in all."""
    texts: list[str] = []
    for line in (data / "gitbugs_hadoop" / "reports.jsonl").read_text().splitlines():
        report = json.loads(line)
        description = " ".join((report.get("description") or "").split())[:description_chars]
        texts.append(f"{report['title']}\n{description}".strip())
    headlines = [json.loads(line) for line in (data / "sts_headlines" / "pairs.jsonl").read_text().splitlines()]
    texts += [f"{pair['s1']}\n{pair['s2']}" for pair in headlines]
    random.Random(7).shuffle(texts)
    kept, total = [], 0
    for text in texts:
        if total >= max_chars:
            break
        kept.append(text)
        total += len(text)
    return kept


def near_exposed(exposed: Sequence[KevItem], candidates: Sequence[KevItem]) -> set[str]:
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
    (id → the band it was removed from) left out because they nearly copy an exposed item."""

    cutoff: date
    groups: dict[int, list[KevItem]]
    unexposed: list[KevItem]
    control: list[KevItem]
    twins: dict[str, str] = field(default_factory=dict)

    def key(self) -> str:
        """A short fingerprint of who is exposed how often (the models' cache key)."""
        exposures = sorted((item.item_id, count) for count in GROUPS for item in self.groups[count])
        return hashlib.sha256(json.dumps([self.cutoff.isoformat(), exposures]).encode()).hexdigest()[:10]

    def exposed(self) -> list[KevItem]:
        return [item for count in GROUPS for item in self.groups[count]]

    def band_of(self) -> dict[str, str]:
        bands = {item.item_id: f"{count}x" for count in GROUPS for item in self.groups[count]}
        bands.update({item.item_id: "unexposed" for item in self.unexposed})
        bands.update({item.item_id: "control" for item in self.control})
        return bands


def design(items: Sequence[KevItem], *, cutoff: date, per_group: int, seed: int, chunk: int = 60) -> Design:
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
    chosen: list[KevItem] = []
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
    return Design(cutoff=cutoff, groups=groups, unexposed=unexposed, control=control, twins=twin_band)
