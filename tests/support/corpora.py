"""Real dated corpora from `../shared/data` for the evidence tests, and synthetic per-item results.

The CISA KEV catalog (CC0) is dated by `dateAdded`; 1,053 records fall before 2024-01-01 and 351 on
or after, a natural temporal split.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np

from schemas.evidence import ItemResult, ProbeItem

KEV_CUTOFF = date(2024, 1, 1)


@dataclass(frozen=True)
class KevRecord:
    cve_id: str
    date_added: datetime
    description: str


def load_kev(shared_data: Path) -> list[KevRecord]:
    """Every KEV record, oldest first (ties in catalog order)."""
    payload = json.loads((shared_data / "cisa_kev" / "known_exploited_vulnerabilities.json").read_text(encoding="utf-8"))
    records = [
        KevRecord(
            cve_id=entry["cveID"],
            date_added=datetime.fromisoformat(entry["dateAdded"]).replace(tzinfo=UTC),
            description=" ".join(entry["shortDescription"].split()),
        )
        for entry in payload["vulnerabilities"]
    ]
    return sorted(records, key=lambda record: record.date_added)


def graded_scores(rng: np.random.Generator, mean: float, size: int | tuple[int, ...], concentration: float = 2.0) -> np.ndarray:
    """Graded per-item scores in [0, 1] with the given mean: Beta(mean·c, (1 − mean)·c).

    A concentration of 2 gives a wide, U-leaning spread (sd ≈ 0.29 at mean 0.55): many items
    nearly failed or nearly passed, as rubric-graded incident answers are.
    """
    return rng.beta(mean * concentration, (1.0 - mean) * concentration, size=size)


def synthetic_results(records: list[KevRecord], *, cutoff: date, rng: np.random.Generator, base_mean: float = 0.55, inflation: float = 0.0) -> list[ItemResult]:
    """One result per record; items dated before `cutoff` have their mean score raised by `inflation`."""
    instant = datetime(cutoff.year, cutoff.month, cutoff.day, tzinfo=UTC)
    results = []
    for record in records:
        mean = base_mean + (inflation if record.date_added < instant else 0.0)
        score = float(graded_scores(rng, mean, 1)[0])
        results.append(ItemResult(item_id=record.cve_id, occurred_at=record.date_added, score=score))
    return results


def kev_probe_items(records: list[KevRecord]) -> list[ProbeItem]:
    """KEV descriptions as probe items (no answer options)."""
    return [ProbeItem(item_id=record.cve_id, occurred_at=record.date_added, text=record.description) for record in records]
