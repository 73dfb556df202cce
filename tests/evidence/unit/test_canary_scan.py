"""The leak scanner on small texts and files: canaries, verbatim and edited copies, boilerplate,
JSON escapes, chunk borders, compressed files and folders."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

from curation.evidence.canary import ScanConfig, ScanIndex, Scanner, ScanReport, WatchedItem

GUID = "1b2c3d4e-1111-4222-8333-444455556666"
CANARY = f"GOLDENSET CANARY GUID {GUID}"
BOILERPLATE = "Apply mitigations per vendor instructions or discontinue use of the product if mitigations are unavailable."
TEXTS = [
    "The balancer in the storage cluster stopped moving blocks after the namenode failover because the stale lease of the previous active node was never released",
    "Requests to the billing service timed out for forty minutes when the connection pool was exhausted by a retry storm from the checkout workers after a deploy",
    "A certificate rotation job replaced the intermediate certificate on the edge proxies but left the old chain cached so mobile clients failed the handshake",
    "Disk pressure on the logging nodes evicted the collector pods which then lost their buffers and dropped audit records for the whole afternoon shift",
]
FILLER = "The quarterly report describes revenue growth in several regions and mentions new hiring plans for the sales team. " * 40


def _items(extra: list[WatchedItem] | None = None) -> list[WatchedItem]:
    items = [WatchedItem(item_id=10 + n, fields={"input": text, "reference": BOILERPLATE}, releases=(("ops", 1), ("ops", 2)), sealed=n == 3) for n, text in enumerate(TEXTS)]
    return items + (extra or [])


def _scanner(**config: float) -> Scanner:
    return Scanner(ScanIndex({"ops": CANARY}, _items(), ScanConfig(**config)), timer=time.perf_counter)  # type: ignore[arg-type]


def _scan(folder: Path, text: str) -> ScanReport:
    """Scan `text` written to a file in `folder` (one chunk: the texts here are far below a chunk's size)."""
    dump = folder / "dump.txt"
    dump.write_text(text, encoding="utf-8")
    return _scanner().scan_paths([dump])


def test_canaries_are_found_by_guid_known_or_not_in_any_case(tmp_path: Path) -> None:
    other = "0f0f0f0f-aaaa-4bbb-8ccc-dddddddddddd"
    text = f"{FILLER} leaked: {CANARY.lower()} ... {GUID.upper()} ... goldenset canary guid: {other} ... a plain uuid {other.replace('0f', 'ab')}"
    report = _scan(tmp_path, text)
    assert [(hit.guid, hit.eval) for hit in report.canaries] == [(GUID, "ops"), (GUID, "ops"), (other, None)]
    assert text.encode()[report.canaries[0].offset :].startswith(GUID.encode())
    assert report.copies == [] and report.found


def test_verbatim_and_lightly_edited_copies_are_found_and_boilerplate_is_not(tmp_path: Path) -> None:
    words = TEXTS[1].split()
    words[4], words[11], words[20] = "stalled", "drained", "shortly"
    edited = " ".join(words).upper()
    text = f"{FILLER}\n> {TEXTS[0]}.\n{FILLER}\n{edited}\n{FILLER}\n{BOILERPLATE}\n{BOILERPLATE}\n"
    report = _scan(tmp_path, text)
    found = {(copy.item_id, copy.field, copy.kind) for copy in report.copies}
    assert found == {(10, "input", "verbatim"), (11, "input", "near-verbatim")}
    near = next(copy for copy in report.copies if copy.item_id == 11)
    assert 0.5 <= near.containment < 1.0 and near.similarity >= 0.4 and near.releases == (("ops", 1), ("ops", 2))
    assert text.encode()[near.offset : near.offset + near.length].decode().startswith("REQUESTS TO THE BILLING")


def test_a_clean_text_and_scattered_phrases_are_not_copies(tmp_path: Path) -> None:
    # Every 5-word phrase of an item, but spread far apart among other text: not a copy.
    words = TEXTS[2].split()
    scattered = f" {FILLER} ".join(" ".join(words[n : n + 6]) for n in range(0, len(words), 6))
    assert not _scan(tmp_path, scattered).found
    assert not _scan(tmp_path, FILLER * 5).found


def test_json_escaped_copies_and_sealed_items_are_reported(tmp_path: Path) -> None:
    line = json.dumps({"text": "Incident:\n" + TEXTS[3].replace(" the ", "\nthe ", 2) + "\n"})
    report = _scan(tmp_path, FILLER + line + FILLER)
    assert [(copy.item_id, copy.sealed) for copy in report.copies] == [(13, True)]


def test_copies_across_chunk_borders_in_files_gz_files_and_folders(tmp_path: Path) -> None:
    scanner = _scanner()
    scanner.index.chunk_bytes, scanner.index.overlap_bytes = 4096, 1024
    body = FILLER * 3
    plain = tmp_path / "crawl" / "part-1.txt"
    plain.parent.mkdir()
    # The copy straddles the first chunk border (4096 bytes).
    start = 4096 - len(TEXTS[0]) // 2
    plain.write_text(body[:start] + "\n" + TEXTS[0] + "\n" + body[start:] + CANARY, encoding="utf-8")
    with gzip.open(tmp_path / "crawl" / "part-2.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write(body + TEXTS[2] + body)
    git = tmp_path / "crawl" / ".git"
    git.mkdir()
    (git / "objects").write_text(TEXTS[1], encoding="utf-8")
    report = scanner.scan_paths([tmp_path / "crawl"])
    assert report.files == 2 and report.unreadable == []
    assert sorted((Path(copy.path).name, copy.item_id) for copy in report.copies) == [("part-1.txt", 10), ("part-2.txt.gz", 12)]
    assert [Path(hit.path).name for hit in report.canaries] == ["part-1.txt"]
    copy = next(copy for copy in report.copies if copy.item_id == 10)
    assert copy.offset == start + 1 and copy.kind == "verbatim"


def test_configuration_is_checked() -> None:
    with pytest.raises(ValueError, match="min_containment"):
        ScanConfig(min_containment=0)
    with pytest.raises(ValueError, match="holds no GUID"):
        ScanIndex({"ops": "no guid here"}, [])
    index = ScanIndex({"ops": CANARY}, [WatchedItem(item_id=1, fields={"title": "Short title"}, releases=(("ops", 1),))])
    assert index.watched_fields == 0
