"""What the release pages show of a release's composition and linking core: the shares a release
recorded by source, category, length band and age band (`schemas.release.ReleaseComposition`),
side by side for two releases with the change between them, and how many dev items it carried
from the release before (`schemas.release.LinkingCore`). Only counts and shares: a category only
sealed items carry was never recorded by name, so nothing here shows sealed content.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from curation.releases.composition import AGE_BANDS, LENGTH_BANDS, OTHER
from schemas.release import LinkingCore, Release, ReleaseComposition, StratumShare

DIMENSIONS = {
    "source": "Source",
    "tag": "Category (first tag)",
    "length": "Input length (characters)",
    "age": "Age at the start of the period",
}
"""The dimensions of a composition, by field, with the caption of their table."""
_BAND_ORDER = {"length": [name for _, name in LENGTH_BANDS], "age": [name for _, name in AGE_BANDS]}


@dataclass(frozen=True)
class StratumRow:
    """One stratum: its share in each release shown (None: the release has none there, or
    recorded no composition), and the change from the first to the last in points."""

    value: str
    shares: list[float | None]

    @property
    def change(self) -> float | None:
        first, last = self.shares[0], self.shares[-1]
        if len(self.shares) < 2 or (first is None and last is None):
            return None
        return 100 * ((last or 0.0) - (first or 0.0))


@dataclass(frozen=True)
class DimensionTable:
    """The strata of one dimension across the releases shown."""

    dimension: str
    caption: str
    rows: list[StratumRow]


def composition_of(release: Release) -> ReleaseComposition | None:
    """The composition `release` recorded (None: written before compositions were recorded)."""
    return ReleaseComposition.model_validate(release.composition) if release.composition is not None else None


def linking_of(release: Release) -> LinkingCore | None:
    """The linking core `release` recorded (None: written before it was recorded)."""
    return LinkingCore.model_validate(release.linking) if release.linking is not None else None


def tables(compositions: Sequence[ReleaseComposition | None]) -> list[DimensionTable]:
    """One table per dimension over `compositions` (one column each, in order): band dimensions in
    band order, the others by the last composition's counts, then the earlier ones', `(other)` last.
    Empty when none recorded a composition."""
    if not any(compositions):
        return []
    found: list[DimensionTable] = []
    for dimension, caption in DIMENSIONS.items():
        columns: list[dict[str, StratumShare]] = [{entry.value: entry for entry in getattr(composition, dimension)} if composition else {} for composition in compositions]
        values: list[str] = []
        for column in reversed(columns):
            values += [value for value in _most_first(column) if value not in values]
        if dimension in _BAND_ORDER:
            values.sort(key=_BAND_ORDER[dimension].index)
        elif OTHER in values:
            values.remove(OTHER)
            values.append(OTHER)
        rows = [StratumRow(value, [_share(column, value, recorded=composition is not None) for column, composition in zip(columns, compositions, strict=True)]) for value in values]
        found.append(DimensionTable(dimension, caption, rows))
    return found


def _most_first(column: dict[str, StratumShare]) -> list[str]:
    return sorted(column, key=lambda value: (-column[value].count, value))


def _share(column: dict[str, StratumShare], value: str, *, recorded: bool) -> float | None:
    if value in column:
        return column[value].share
    return 0.0 if recorded else None
