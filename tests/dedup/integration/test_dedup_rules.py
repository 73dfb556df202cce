"""The dedup rules on every backend, with the real model: what separates "the same incident" from
"the same kind of incident" (identifiers in titles, a source's template), no chaining through a
duplicate, and `--redecide` under changed thresholds keeping what people decided."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.embeddings import Vectors
from curation.dedup.overrides import rule_duplicate_of
from schemas.common import utcnow
from schemas.dedup import DedupDecision
from schemas.item import Item, ItemStatus
from service.core.db import write_transaction
from service.core.settings import Settings
from service.dedup.runner import run_curation, run_redecide
from tests.dedup_support import MemoEncoder, hadoop_reports, ingest

WEBCOMPAT_FORM = """<!-- @browser: Firefox Mobile {version}.0 -->
<!-- @ua_header: Mozilla/5.0 (Android 10; Mobile; rv:{version}.0) Gecko/{version}.0 Firefox/{version}.0 -->
<!-- @reported_with: mobile-reporter -->

**URL**: https://{host}/

**Browser / Version**: Firefox Mobile {version}.0
**Operating System**: Android
**Tested Another Browser**: Yes Chrome

**Problem type**: {problem}
**Description**: {problem}
**Steps to Reproduce**:
{steps}

<details>
<summary>Browser Configuration</summary>
<ul>
  <li>gfx.webrender.all: false</li>
  <li>gfx.webrender.blob-images: true</li>
  <li>image.mem.shared: true</li>
  <li>channel: nightly</li>
</ul>
</details>

_From [webcompat.com](https://webcompat.com/) with love_"""

SITES = [
    ("www.bbc.co.uk", "Design is broken", "The navigation menu overlaps the headline on narrow screens."),
    ("m.facebook.com", "Site is not usable", "Tapping the login button does nothing at all."),
    ("www.amazon.de", "Design is broken", "Product images are stretched to twice their width."),
    ("www.reddit.com", "Something else", "Infinite scrolling stops loading new posts after the second page."),
    ("www.google.com", "Site is not usable", "The search box cannot be focused after rotating the phone."),
    ("twitter.com", "Design is broken", "Tweets with images are cut off at the right edge."),
    ("www.wikipedia.org", "Design is broken", "Tables overflow the page and cannot be scrolled sideways."),
    ("www.netflix.com", "Video or audio doesn't play", "Every title shows an unsupported browser message."),
    ("www.ebay.com", "Site is not usable", "The checkout page reloads endlessly after entering the address."),
    ("www.instagram.com", "Design is broken", "Stories are shown in a thin strip at the top of the page."),
    ("www.linkedin.com", "Something else", "Notifications badge never clears after reading messages."),
    ("www.twitch.tv", "Video or audio doesn't play", "Live streams stutter every few seconds while chat scrolls."),
    ("www.booking.com", "Site is not usable", "The date picker closes before a date can be chosen."),
    ("www.imdb.com", "Design is broken", "Ratings stars render as empty boxes."),
    ("www.espn.com", "Video or audio doesn't play", "Highlight clips play sound but the picture stays black."),
    ("www.yahoo.com", "Something else", "The page asks for cookie consent again on every visit."),
    ("www.paypal.com", "Site is not usable", "The one-time code field rejects every digit typed."),
    ("www.spotify.com", "Video or audio doesn't play", "The web player shows that playback of protected content is disabled."),
    ("www.nytimes.com", "Design is broken", "Article text is hidden behind a white overlay."),
    ("www.airbnb.com", "Site is not usable", "The map cannot be panned with one finger."),
    ("www.github.com", "Design is broken", "Code blocks wrap every character onto its own line."),
]
YOUTUBE = "www.youtube.com"
FREEZES = "After the first advertisement the video freezes on a black screen and never resumes."
SUBTITLES = "Subtitles are not shown when the player is switched to fullscreen mode."
FREEZES_AGAIN = "Once the first ad is over, the video stays on a black screen and never plays again."


def _webcompat(number: int, host: str, problem: str, steps: str, version: int = 68) -> dict[str, Any]:
    return {
        "id": f"WC-{number}",
        "created": f"2019-07-{number:02d}T10:00:00",
        "title": f"{host} - {problem}",
        "description": WEBCOMPAT_FORM.format(version=version, host=host, problem=problem, steps=steps),
    }


def _decided(session: Session) -> dict[str, Item]:
    return {item.external_id: item for item in session.exec(select(Item))}


def _decision(session: Session, item: Item) -> DedupDecision:
    decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item.id).order_by(col(DedupDecision.id).desc())).first()
    assert decision is not None
    return decision


def test_identifiers_in_titles_keep_same_kind_tasks_apart(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    javadoc = "mvn javadoc:javadoc fails on JDK 11 with errors in this module."
    body = "Jetty {version} fixes CVE-2021-28165 and CVE-2021-34428; update the dependency in hadoop-project."
    records = [
        {"id": "JETTY-39", "created": "2021-04-01T10:00:00", "title": "Upgrade to Jetty 9.4.39", "description": body.format(version="9.4.39")},
        {"id": "JETTY-44", "created": "2021-09-01T10:00:00", "title": "Upgrade to Jetty 9.4.44", "description": body.format(version="9.4.44")},
        {"id": "JETTY-44-AGAIN", "created": "2021-09-03T10:00:00", "title": "Upgrade to Jetty 9.4.44", "description": body.format(version="9.4.44")},
        {"id": "JAVADOC-TOOLS", "created": "2021-05-01T10:00:00", "title": "Fix javadoc errors in hadoop-tools", "description": javadoc},
        {"id": "JAVADOC-MR", "created": "2021-05-02T10:00:00", "title": "Fix javadoc errors in hadoop-mapreduce", "description": javadoc},
    ]
    ingest(engine, "hadoop", records)
    run_curation(engine, settings, encoder=encoder)
    with Session(engine) as session:
        items = _decided(session)
        # Normalisation masks numbers, so the two upgrades share a hash; their versions tell them apart.
        assert items["JETTY-39"].content_hash == items["JETTY-44"].content_hash
        assert {name: items[name].status for name in ("JETTY-39", "JETTY-44", "JAVADOC-TOOLS", "JAVADOC-MR")} == dict.fromkeys(
            ("JETTY-39", "JETTY-44", "JAVADOC-TOOLS", "JAVADOC-MR"), ItemStatus.UNIQUE.value
        )
        vetoed = {entry["item"]: entry["why"] for entry in _decision(session, items["JETTY-44"]).details["vetoed"]}
        assert "9.4.44" in vetoed[items["JETTY-39"].id] and "9.4.39" in vetoed[items["JETTY-39"].id]
        vetoed = {entry["item"]: entry["why"] for entry in _decision(session, items["JAVADOC-MR"]).details["vetoed"]}
        assert "hadoop-mapreduce" in vetoed[items["JAVADOC-TOOLS"].id]
        # The re-filing is a duplicate of the upgrade it repeats, not of the first one with its hash.
        again = items["JETTY-44-AGAIN"]
        assert (again.status, again.duplicate_of) == (ItemStatus.DUPLICATE.value, items["JETTY-44"].id)
        decision = _decision(session, again)
        assert decision.details["rule"] == "exact" and decision.details["matched_item"] == items["JETTY-44"].id and decision.details["rules"]


def test_a_source_template_is_no_evidence_of_sameness(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    records = [_webcompat(number, host, problem, steps) for number, (host, problem, steps) in enumerate(SITES, start=1)]
    problem = "Video or audio doesn't play"
    records += [
        _webcompat(24, YOUTUBE, problem, FREEZES),
        _webcompat(25, YOUTUBE, problem, SUBTITLES, version=69),
        _webcompat(26, YOUTUBE, problem, FREEZES_AGAIN),
    ]
    ingest(engine, "webcompat", records)
    run_curation(engine, settings, encoder=encoder)
    with Session(engine) as session:
        items = _decided(session)
        assert items["WC-25"].status == ItemStatus.UNIQUE.value  # same site and form, another problem
        vetoed = {entry["item"]: entry["why"] for entry in _decision(session, items["WC-25"]).details["vetoed"]}
        assert "source shares" in vetoed[items["WC-24"].id]
        assert (items["WC-26"].status, items["WC-26"].duplicate_of) == (ItemStatus.DUPLICATE.value, items["WC-24"].id)
        assert sum(item.status == ItemStatus.DUPLICATE.value for item in items.values()) == 1


class _KeywordEncoder:
    """Vectors chosen by test: a text's vector is the one of the first keyword it contains."""

    model_id = "keywords@test"
    dim = 3

    def __init__(self, vectors: dict[str, Sequence[float]]) -> None:
        self.vectors = {keyword: np.asarray(vector, dtype=np.float32) / np.linalg.norm(vector) for keyword, vector in vectors.items()}

    def encode(self, texts: Sequence[str]) -> Vectors:
        rows = [next(vector for keyword, vector in self.vectors.items() if keyword in text) for text in texts]
        return np.vstack(rows).astype(np.float32) if rows else np.zeros((0, self.dim), dtype=np.float32)


def test_a_candidate_never_joins_a_cluster_through_a_duplicate(engine: Engine, settings: Settings) -> None:
    # Each step turns 18 degrees: B is close to A (cosine 0.95), C to B (0.95), but C is not close to A (0.81).
    step = np.radians(18)
    encoder = _KeywordEncoder({name: (np.cos(turn * step), np.sin(turn * step), 0.0) for turn, name in enumerate(("ALPHA", "BRAVO", "CHARLIE"))})
    records = [
        {"id": "A", "created": "2021-01-01T10:00:00", "title": "ALPHA disk pressure on datanodes", "description": "ALPHA the first report, in its own words"},
        {"id": "B", "created": "2021-01-02T10:00:00", "title": "BRAVO datanodes run out of disk", "description": "BRAVO a second telling of it"},
        {"id": "C", "created": "2021-01-03T10:00:00", "title": "CHARLIE volumes fill up on workers", "description": "CHARLIE a third, drifting further"},
    ]
    ingest(engine, "chain", records)
    run_curation(engine, settings, encoder=encoder)
    with Session(engine) as session:
        items = _decided(session)
        assert (items["B"].status, items["B"].duplicate_of) == (ItemStatus.DUPLICATE.value, items["A"].id)
        assert items["C"].status == ItemStatus.UNIQUE.value
        details = _decision(session, items["B"]).details
        assert details["rule"] == "fresh" and details["matched_item"] == items["A"].id and details["margin"] > 0


def test_redecide_applies_new_thresholds_and_keeps_what_people_decided(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    ingest(engine, "hadoop", hadoop_reports(40))
    # Asking off: the judge would question these loose merges (a curator asked, the items kept unique).
    loose = settings.model_copy(update={"dedup_fresh_embedding_threshold": 0.5, "dedup_fresh_title_threshold": 0.3, "dedup_confirm_threshold": 0.0})
    run_curation(engine, loose, encoder=encoder)
    with Session(engine) as session:
        merged = [item for item in session.exec(select(Item).where(Item.status == ItemStatus.DUPLICATE.value).order_by(col(Item.id)))]
    assert len(merged) >= 3, "loose thresholds merge distinct reports"
    ruled, reviewed = merged[0], merged[1]
    with write_transaction(engine) as writer:
        assert ruled.duplicate_of is not None and reviewed.id is not None
        # A person confirmed one merge; another duplicate was approved by hand as an item of its own.
        assert ruled.id is not None
        rule_duplicate_of(session=writer, item_id=ruled.id, other_id=ruled.duplicate_of, note="same outage", actor="curator", now=utcnow())
        stored = writer.get(Item, reviewed.id)
        assert stored is not None
        stored.status, stored.duplicate_of = ItemStatus.APPROVED.value, None

    summary = run_redecide(engine, settings, encoder=encoder)
    # Kept: both items of the ruled pair, and the approved one.
    assert (summary.reopened, summary.kept) == (40 - 3, 3)
    assert summary.by_kind.get("duplicate -> unique", 0) >= len(merged) - 3
    assert len(summary.changes) == summary.reopened - summary.unchanged
    with Session(engine) as session:
        now = {item.id: item for item in session.exec(select(Item))}
        assert (now[ruled.id].status, now[ruled.id].duplicate_of) == (ItemStatus.DUPLICATE.value, ruled.duplicate_of)
        assert now[reviewed.id].status == ItemStatus.APPROVED.value
        assert not [item for item in now.values() if item.status == ItemStatus.CANDIDATE.value]
        assert sum(item.status == ItemStatus.DUPLICATE.value for item in now.values()) < len(merged)

    again = run_redecide(engine, settings, encoder=encoder)
    assert again.changes == [] and again.reopened == summary.reopened


# A VS Code report body written in Chinese: clauses split by full-width commas, so MinHash sees words.
EDITOR_CRASH = (
    "打开大文件时编辑器崩溃，错误日志显示内存不足，重启以后问题依旧，禁用所有插件也没有用，换了工作区也一样，清空缓存也不行，"
    "降级到上个版本正常，文件大约两百兆，是一个日志文件，系统是视窗十一，内存有十六个吉，希望尽快修复"
)
EDITOR_CRASH_EDITED = EDITOR_CRASH.replace("希望尽快修复", "麻烦看一下")


def test_text_the_model_cannot_read_is_never_merged_on_embeddings(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    """Two short Chinese titles the English model turns into unknown tokens embed alike; with the same
    one-line body they stay two items, while exact and near-verbatim copies still merge."""
    body = "打开项目以后就一直这样"
    records = [
        {"id": "SLOW", "created": "2024-03-01T10:00:00", "title": "编辑特别卡顿", "description": body},
        {"id": "DENIED", "created": "2024-03-02T10:00:00", "title": "拒绝访问", "description": body},
        {"id": "DENIED-AGAIN", "created": "2024-03-03T10:00:00", "title": "拒绝访问", "description": body},
        {"id": "CRASH", "created": "2024-03-04T10:00:00", "title": "打开大文件时崩溃", "description": EDITOR_CRASH},
        {"id": "CRASH-EDITED", "created": "2024-03-05T10:00:00", "title": "打开大文件时崩溃", "description": EDITOR_CRASH_EDITED},
    ]
    ingest(engine, "vscode", records)
    run_curation(engine, settings, encoder=encoder)
    with Session(engine) as session:
        items = _decided(session)
        assert items["SLOW"].status == items["DENIED"].status == ItemStatus.UNIQUE.value
        decision = _decision(session, items["DENIED"])
        assert decision.details["unreadable"]["title"] > 0.9 and decision.details["unreadable"]["body"] > 0.8
        # The embedding alone would have merged them: the refusal is listed with the fields it could not read.
        vetoed = {entry["item"]: entry for entry in decision.details["vetoed"]}
        refused = vetoed[items["SLOW"].id]
        assert refused["stage"] == "embedding" and refused["score"] >= settings.dedup_config().fresh_embedding_threshold
        assert set(refused["unreadable"]) == {"body", "title"} and "cannot read" in refused["why"]
        again = items["DENIED-AGAIN"]
        assert (again.status, again.duplicate_of) == (ItemStatus.DUPLICATE.value, items["DENIED"].id)
        assert _decision(session, again).stage == "exact"
        edited = items["CRASH-EDITED"]
        assert (edited.status, edited.duplicate_of) == (ItemStatus.DUPLICATE.value, items["CRASH"].id)
        decision = _decision(session, edited)
        assert decision.stage == "minhash" and decision.details["unreadable"]["title"] > 0.5


def test_english_translations_stay_readable(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    """The same reports in English: nothing is unreadable, and the decision is the embedding's own."""
    body = "It has been like this ever since the project was opened."
    records = [
        {"id": "SLOW", "created": "2024-03-01T10:00:00", "title": "Editing is extremely sluggish", "description": body},
        {"id": "DENIED", "created": "2024-03-02T10:00:00", "title": "Access denied", "description": body},
    ]
    ingest(engine, "vscode-en", records)
    run_curation(engine, settings, encoder=encoder)
    with Session(engine) as session:
        items = _decided(session)
        assert items["DENIED"].status == ItemStatus.UNIQUE.value
        decision = _decision(session, items["DENIED"])
        assert "unreadable" not in decision.details
        assert all("cannot read" not in entry["why"] for entry in decision.details.get("vetoed", []))
