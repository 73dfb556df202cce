"""The bench's data: CISA KEV records as the probed items, cut into exposure groups, bands and near
duplicates, and background text from the other data sets of `../shared/data` (never KEV).

An item's text is what the example mapping (`examples/mappings/cisa_kev.yaml`) makes its input:
`{vendorProject} {product}: {shortDescription}`, dated by `dateAdded`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import cache
from pathlib import Path

from schemas.evidence import ProbeItem, cutoff_instant

GROUPS = (1, 3, 10, 30)
"""How many times model C sees each exposure group's items in training."""
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class KevItem:
    item_id: str
    occurred_at: datetime
    text: str

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


@cache
def _shingles(text: str, size: int = 3) -> frozenset[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return frozenset(tuple(words[index : index + size]) for index in range(max(1, len(words) - size + 1)))


def near_duplicate_pairs(items: Sequence[KevItem], *, threshold: float = 0.5) -> list[tuple[int, int]]:
    """Index pairs of items whose word 3-shingle Jaccard is at least `threshold` (exact copies
    included). A stand-in for the product's clean-band function where it is not available."""
    sets = [_shingles(item.text) for item in items]
    pairs = []
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            union = len(sets[i] | sets[j])
            if union and len(sets[i] & sets[j]) / union >= threshold:
                pairs.append((i, j))
    return pairs


NearDuplicates = Callable[[Sequence[KevItem], Sequence[KevItem]], set[str]]
"""Given the exposed items and candidates, the ids of candidates that are near duplicates of an exposed item."""


def shingle_twins(exposed: Sequence[KevItem], candidates: Sequence[KevItem], threshold: float = 0.5) -> set[str]:
    exposed_sets = [_shingles(item.text) for item in exposed]
    twins = set()
    for item in candidates:
        mine = _shingles(item.text)
        if any(len(mine & other) / max(1, len(mine | other)) >= threshold for other in exposed_sets):
            twins.add(item.item_id)
    return twins


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
    twin_method: str = ""

    def exposed(self) -> list[KevItem]:
        return [item for count in GROUPS for item in self.groups[count]]

    def band_of(self) -> dict[str, str]:
        bands = {item.item_id: f"{count}x" for count in GROUPS for item in self.groups[count]}
        bands.update({item.item_id: "unexposed" for item in self.unexposed})
        bands.update({item.item_id: "control" for item in self.control})
        return bands


def design(
    items: Sequence[KevItem], *, cutoff: date, per_group: int, seed: int, twins: NearDuplicates = shingle_twins, twin_method: str = "word 3-shingle Jaccard >= 0.5"
) -> Design:
    """Draw `per_group` exposed items per group from the pre-cutoff items, no two of them near
    duplicates of each other (so a group's items are not another group's in disguise), and leave
    every near duplicate of an exposed item out of the unexposed and control bands."""
    instant = cutoff_instant(cutoff)
    before = [item for item in items if item.occurred_at < instant]
    after = [item for item in items if item.occurred_at >= instant]
    order = list(before)
    random.Random(seed).shuffle(order)
    chosen: list[KevItem] = []
    for item in order:
        if len(chosen) == per_group * len(GROUPS):
            break
        if not chosen or not twins(chosen, [item]):
            chosen.append(item)
    if len(chosen) < per_group * len(GROUPS):
        raise ValueError(f"only {len(chosen)} distinct pre-cutoff items for {len(GROUPS)} groups of {per_group}")
    groups = {count: chosen[index * per_group : (index + 1) * per_group] for index, count in enumerate(GROUPS)}
    exposed_ids = {item.item_id for item in chosen}
    rest = [item for item in before if item.item_id not in exposed_ids]
    removed = twins(chosen, rest + after)
    unexposed = [item for item in rest if item.item_id not in removed]
    control = [item for item in after if item.item_id not in removed]
    twin_band = {item.item_id: ("unexposed" if item.occurred_at < instant else "control") for item in rest + after if item.item_id in removed}
    return Design(cutoff=cutoff, groups=groups, unexposed=unexposed, control=control, twins=twin_band, twin_method=twin_method)
