"""Redaction of addresses against version numbers, measured on the labelled sample of dotted numbers.

The sample (`tests/support/dotted_numbers.jsonl`, drawn from every pool in `../shared/data` and
labelled by reading) holds addresses that identify infrastructure (private, shared and public
hosts), well-known addresses that identify nobody (loopback, unspecified, cloud metadata), version
numbers and other dotted numbers (dates, times, cookie ids). Each record's text is redacted with
the default policy and the labelled string checked: an identifying address must be replaced,
everything else left as it was. Prints the shares, per pool, and the misses with `--misses`.

    .venv/bin/python bench/redaction_versions.py
    .venv/bin/python bench/redaction_versions.py --recogniser presidio   # needs presidio-analyzer

Targets: >= 0.99 of identifying addresses redacted, <= 0.01 of version strings touched.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.dotted_numbers import Figures, Touches, load, measure, redaction_touches, span_touches

ADDRESS_TARGET = 0.99
VERSION_TARGET = 0.01


def goldenset_touches() -> Touches:
    from ingest.redaction.redactor import Redactor

    redactor = Redactor()
    return redaction_touches(lambda text: redactor.redact(text).text)


def presidio_touches() -> Touches:
    """Presidio's IP recogniser as it ships (a scored regex with context words), any score."""
    # Not a dependency of the project: installed by hand to compare (`pip install presidio-analyzer`).
    recognisers = importlib.import_module("presidio_analyzer.predefined_recognizers")
    recogniser = recognisers.IpRecognizer()
    entities = recogniser.supported_entities
    return span_touches(lambda text: [(r.start, r.end) for r in recogniser.analyze(text, entities, None)])


def report(figures: Figures, *, misses: bool) -> bool:
    rows = [
        ("identifying addresses redacted", figures.groups["identifying"], False),
        ("well-known addresses kept", figures.groups["well-known"], True),
        ("version strings touched", figures.groups["version"], False),
        ("  of which four-part", figures.groups["four-part version"], False),
        ("other dotted numbers touched", figures.groups["other"], False),
    ]
    for name, tally, inverse in rows:
        count = tally.total - tally.touched if inverse else tally.touched
        share = count / tally.total if tally.total else 0.0
        print(f"{name:<34} {count:>4} / {tally.total:<4} {share:6.3f}")
    print()
    print(f"{'pool':<16} {'group':<12} {'n':>4} {'touched':>8}")
    for (pool, group), tally in sorted(figures.pools.items()):
        print(f"{pool:<16} {group:<12} {tally.total:>4} {tally.touched:>8}")
    if misses:
        print()
        for group, tally in figures.groups.items():
            if group == "four-part version":
                continue
            for record in tally.misses:
                window = record.text[max(0, record.start - 50) : record.end + 25]
                print(f"MISS {group:<11} {record.pool:<14} {record.string!r:<20} {window!r}")
    passed = figures.addresses_redacted >= ADDRESS_TARGET and figures.versions_touched <= VERSION_TARGET
    print()
    print(
        f"{'PASS' if passed else 'FAIL'}: addresses redacted {figures.addresses_redacted:.3f} (>= {ADDRESS_TARGET}), "
        f"versions touched {figures.versions_touched:.3f} (<= {VERSION_TARGET})"
    )
    return passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recogniser", choices=("goldenset", "presidio"), default="goldenset")
    parser.add_argument("--misses", action="store_true", help="list every record decided wrongly")
    args = parser.parse_args()
    records = load()
    touches = goldenset_touches() if args.recogniser == "goldenset" else presidio_touches()
    print(f"{len(records)} labelled dotted numbers, recogniser: {args.recogniser}\n")
    report(measure(records, touches), misses=args.misses)


if __name__ == "__main__":
    main()
