"""Fingerprint normalisation and text kinds: two reports that differ only in volatile tokens
fingerprint alike; short machine messages are told from short sentences."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from curation.dedup.fingerprints import MinHashRecipe, shingles, sketch_texts, tokens
from curation.dedup.rules import DedupConfig
from curation.dedup.text_kind import TextKind, looks_machine_written, text_kind
from ingest.normalisation import _MASKS, content_hash, normalise_text


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Connection from 218.188.2.4 () at Sun Jun 19 04:08:53 2005", "connection from 10.0.0.7 () at Mon Jul 4 11:00:02 2005"),
        ("rhost=61-220-159-99.hinet-ip.hinet.net user=root", "rhost=n219076184117.netvigator.com user=root"),
        ('10.11.10.1 "GET /v2/54fadb41/servers/detail HTTP/1.1" status: 200', '10.11.10.9 "GET /openstack/2013-10-17/meta_data.json HTTP/1.1" status: 404'),
        ("Instance 3fa85f64-5717-4562-b3fc-2c963f66afa6 failed at 2024-03-01T10:00:00Z", "instance 9b2e4c1a-0d3f-4e5a-8b7c-6d5e4f3a2b1c failed at 2024-03-02 11:12:13"),
        (r"Failed to open C:\Windows\Servicing\Packages\a.mum (0x800f0805)", r"failed to open C:\Windows\Temp\b.cab (0x80070002)"),
        ("worker-3 OOM on host-12.example.com", "worker-17 OOM on host-4.example.com"),
    ],
)
def test_texts_differing_only_in_volatile_tokens_normalise_alike(first: str, second: str) -> None:
    assert normalise_text(first) == normalise_text(second)
    assert content_hash("", first, "") == content_hash("", second, "")


def test_what_an_incident_is_about_is_kept() -> None:
    assert normalise_text("Disk full on db") != normalise_text("Disk slow on db")
    assert normalise_text("ＦＵＬＬ　width") == "full width"  # NFKC, case, whitespace
    assert normalise_text("<b>bold</b> and {code}x{code}") == "bold and x"


def test_short_texts_are_sketched_over_tokens_and_token_pairs() -> None:
    recipe = MinHashRecipe()
    assert tokens("Session closed for user (cyrus).") == ["session", "closed", "for", "user", "cyrus"]
    short = shingles("session closed for user cyrus", recipe)
    assert b"cyrus" in short and b"user cyrus" in short and b"for user cyrus" not in short
    long_text = " ".join(f"word{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(40))
    assert all(gram.count(b" ") == 2 for gram in shingles(long_text, recipe))
    # One line with a host name and one without: the same message. Most of its 3-grams differ.
    one = shingles("connection from 1.2.3.4 () at Sun Jun 19 04:08:53 2005", recipe)
    other = shingles("connection from 1.2.3.4 (h219-85-75-20.gtconnect.net) at Sun Jun 19 04:08:53 2005", recipe)
    assert len(one & other) / len(one | other) >= DedupConfig().minhash_threshold
    sketched = sketch_texts(["connection from 1.2.3.4 () at Sun Jun 19 04:08:53 2005", "VM paused"], recipe)
    assert sketched[0].jaccard(sketched[1]) < 0.2


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[instance: 3fa85f64-5717-4562-b3fc-2c963f66afa6] VM Started (Lifecycle Event)", TextKind.MACHINE),
        ("acquire lock=233570404, flags=0x1, tag=View Lock", TextKind.MACHINE),
        ("Registered BlockManager", TextKind.MACHINE),
        ("mapred.task.id is deprecated", TextKind.MACHINE),
        ("Obama signs bill to cut spending", TextKind.SHORT),
        ("Poll: Putin to win Russia presidential vote", TextKind.SHORT),
        ("Gemma McCluskie's brother charged with her murder", TextKind.SHORT),
        ("Contact <EMAIL> about the outage", TextKind.SHORT),
        (" ".join(["The nightly export job failed again because the disk was full"] * 4), TextKind.LONG),
    ],
)
def test_text_kinds(text: str, kind: TextKind) -> None:
    assert text_kind(text, normalise_text(text), len(tokens(text)), short_tokens=30) == kind
    assert looks_machine_written(text, normalise_text(text)) == (kind == TextKind.MACHINE) or kind == TextKind.LONG


def test_skipping_a_mask_whose_hint_is_absent_changes_no_normalised_text() -> None:
    """Every mask applied to every text (no hints) gives what `normalise_text` gives, on the real
    reports, KEV records and log lines of the shared data and on texts holding each hint."""
    data = Path(__file__).resolve().parents[4] / "shared" / "data"
    texts = [
        r"C:\Users\x\y.txt at 0XFF 2024-01-02T03:04:05Z Sun Jun 19 04:08:53 2005 <IPV4> `x` **y** __z__ ~~w~~ {code:java} http://a/b /a/b/c fe80::1",
    ]
    for line in (data / "gitbugs_hadoop" / "reports.jsonl").read_text().splitlines()[:800]:
        report = json.loads(line)
        texts += [report.get("title") or "", report.get("description") or ""]
    for record in json.loads((data / "cisa_kev" / "known_exploited_vulnerabilities.json").read_text())["vulnerabilities"][:400]:
        texts += [record.get("vulnerabilityName", ""), record.get("shortDescription", ""), record.get("notes", "")]
    for log in sorted((data / "loghub_2k").glob("*/*.log_structured.csv")):
        texts += log.read_text(errors="replace").splitlines()[:150]

    def every_mask(text: str) -> str:
        text = unicodedata.normalize("NFKC", text)
        for pattern, replacement, _hints in _MASKS:
            text = pattern.sub(replacement, text)
        return re.sub(r"\s+", " ", text.casefold()).strip()

    assert len(texts) > 2000
    assert [text for text in texts if normalise_text(text) != every_mask(text)] == []
