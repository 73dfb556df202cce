"""The labelled sample of dotted numbers (`dotted_numbers.jsonl`) and how redaction is measured on it.

Each record is a dotted number (``a.b.c.d``, ``a.b.c``) or a dashed quad (``a-b-c-d``) drawn from a
pool in ``../shared/data``, with the text around it, labelled by reading it: ``address`` (with its
kind), ``version`` or ``other``. `dotted_numbers.md` beside this file gives the labelling rule, how
the sample was drawn and the sources' licences. Used by `tests/sources/unit/test_redaction_sample.py`
(pass/fail on the targets) and `bench/redaction_versions.py` (figures).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE = Path(__file__).with_suffix(".jsonl")

IDENTIFYING_KINDS = frozenset({"private", "shared", "public"})
"""Address kinds that identify a team's infrastructure: redaction must replace them."""
WELL_KNOWN_KINDS = frozenset({"loopback", "unspecified", "documentation", "resolver", "metadata", "netmask"})
"""Address kinds that identify nobody (see docs/ingesting.md, "Redaction"): kept as content."""

Touches = Callable[[str, int, int], bool]
"""Whether redacting `text` changes any character of ``text[start:end]``."""


@dataclass(frozen=True)
class Labelled:
    pool: str
    record: str
    form: str
    string: str
    label: str
    kind: str | None
    start: int
    text: str

    @property
    def end(self) -> int:
        return self.start + len(self.string)

    @property
    def group(self) -> str:
        """``identifying``, ``well-known``, ``version`` or ``other``."""
        if self.label == "address":
            return "identifying" if self.kind in IDENTIFYING_KINDS else "well-known"
        return self.label


def load(path: Path = SAMPLE) -> list[Labelled]:
    """The labelled records, in file order; each record's string is checked to stand at its offset."""
    records = [Labelled(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]
    for record in records:
        if record.text[record.start : record.end] != record.string:
            raise ValueError(f"{record.record}: {record.string!r} is not at offset {record.start}")
        if record.label == "address" and record.kind not in IDENTIFYING_KINDS | WELL_KNOWN_KINDS:
            raise ValueError(f"{record.record}: unknown address kind {record.kind!r}")
    return records


def redaction_touches(redact: Callable[[str], str]) -> Touches:
    """A `Touches` for a function from text to redacted text: the changed characters are found by
    aligning the two texts, so it works for any redactor, old or new."""

    def touches(text: str, start: int, end: int) -> bool:
        redacted = redact(text)
        if redacted == text:
            return False
        opcodes = difflib.SequenceMatcher(None, text, redacted, autojunk=False).get_opcodes()
        for tag, i1, i2, _, _ in opcodes:
            if tag == "equal":
                continue
            if i1 < end and i2 > start:
                return True
            if tag == "insert" and start < i1 < end:
                return True
        return False

    return touches


def span_touches(spans: Callable[[str], Iterable[tuple[int, int]]]) -> Touches:
    """A `Touches` for a recogniser that reports the spans it would replace."""

    def touches(text: str, start: int, end: int) -> bool:
        return any(s < end and e > start for s, e in spans(text))

    return touches


@dataclass
class Tally:
    total: int = 0
    touched: int = 0
    misses: list[Labelled] = field(default_factory=list)

    def share_touched(self) -> float:
        return self.touched / self.total if self.total else 0.0


@dataclass
class Figures:
    """Per group (`Labelled.group`, plus ``four-part version``), how many were touched; and per pool."""

    groups: dict[str, Tally]
    pools: dict[tuple[str, str], Tally]

    @property
    def addresses_redacted(self) -> float:
        return self.groups["identifying"].share_touched()

    @property
    def well_known_kept(self) -> float:
        return 1.0 - self.groups["well-known"].share_touched()

    @property
    def versions_touched(self) -> float:
        return self.groups["version"].share_touched()

    @property
    def non_addresses_touched(self) -> float:
        version, other = self.groups["version"], self.groups["other"]
        total = version.total + other.total
        return (version.touched + other.touched) / total if total else 0.0


def measure(records: Iterable[Labelled], touches: Touches) -> Figures:
    """Runs `touches` on every record. A miss is an identifying address left alone, or anything
    else touched."""
    groups = {name: Tally() for name in ("identifying", "well-known", "version", "four-part version", "other")}
    pools: dict[tuple[str, str], Tally] = {}
    for record in records:
        touched = touches(record.text, record.start, record.end)
        names = [record.group]
        if record.label == "version" and record.form == "dotted4":
            names.append("four-part version")
        for tally in (*(groups[name] for name in names), pools.setdefault((record.pool, record.group), Tally())):
            tally.total += 1
            tally.touched += touched
            if touched != (record.group == "identifying"):
                tally.misses.append(record)
    return Figures(groups, pools)
