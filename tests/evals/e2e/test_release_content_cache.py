"""Finished dev release answers kept in memory, over HTTP on a real server: a repeated read is the
same bytes and headers without querying the released rows again, every 200 read (cached or not)
leaves its own audit event naming exactly the items its body carries, a revalidation (304) leaves
none, a new or withdrawn release is seen at once, sealed reads are never cached and always counted,
a filtered read is its own answer, and with the cache turned off the answers are the same."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from schemas.release import SealedRead
from service.app import create_app
from service.evals.content_cache import ReleaseContentCache
from tests.conftest import LiveServer, make_settings, serve
from tests.eval_support import ingest_and_curate
from tests.evals.integration.test_refresh import kev

DEFINITION = {"name": "ops", "sources": ["kev"], "target_size": 20, "approval_policy": "auto", "max_age_days": None, "sealed_fraction": 0.5, "sealed_read_budget": 2}
ITEMS = "/v1/evals/ops/releases/{ref}/items"
EXPORT = "/v1/evals/ops/releases/{ref}/export.jsonl"
KEPT_HEADERS = ("content-type", "content-disposition", "etag", "cache-control")


def _first_release(live_server: LiveServer, engine: Engine) -> httpx.Client:
    """Eval `ops` with release 1 (February's twenty items, about half of them sealed); returns an admin client."""
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 21)])
    admin = live_server.client("admin")
    assert admin.post("/v1/evals", json=DEFINITION).status_code == 201
    first = admin.post("/v1/evals/ops/refresh", params={"at": "2024-03-05T00:00:00Z"})
    assert first.status_code == 201, first.text
    return admin


def _second_release(admin: httpx.Client, engine: Engine) -> None:
    """Release 2 of `ops`, for April, taking five March items."""
    ingest_and_curate(engine, "kev", [kev(n, f"2024-03-{n - 10:02d}") for n in range(21, 26)])
    second = admin.post("/v1/evals/ops/refresh", params={"at": "2024-04-05T00:00:00Z"})
    assert second.status_code == 201 and second.json()["release"]["number"] == 2, second.text


def _manifest_ids(client: httpx.Client, ref: str) -> dict[str, set[int]]:
    """Item ids by split, from the release's manifest."""
    entries = client.get(f"/v1/evals/ops/releases/{ref}").json()["items"]
    return {split: {entry["item_id"] for entry in entries if entry["split"] == split} for split in ("dev", "sealed")}


def _digests(client: httpx.Client, ref: str) -> dict[str, int]:
    """Item id by content digest, from the release's manifest."""
    return {entry["content_digest"]: entry["item_id"] for entry in client.get(f"/v1/evals/ops/releases/{ref}").json()["items"]}


def _body_ids(response: httpx.Response) -> list[int]:
    return [item["item_id"] for item in response.json()["items"]]


def _export_ids(response: httpx.Response, by_digest: dict[str, int]) -> list[int]:
    return [by_digest[json.loads(line)["content_digest"]] for line in response.text.splitlines()]


def _reads(engine: Engine, *actions: str) -> list[AuditEvent]:
    with Session(engine) as session:
        return list(session.exec(select(AuditEvent).where(col(AuditEvent.action).in_(actions)).order_by(col(AuditEvent.id))).all())


@contextmanager
def _released_row_queries(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements over `release_item` run on `engine` during the block."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if "release_item" in statement:
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _cache(app: FastAPI) -> ReleaseContentCache:
    cache: ReleaseContentCache = app.state.release_content_cache
    return cache


def test_a_repeated_dev_read_is_served_from_memory_and_each_read_is_audited(live_server: LiveServer, engine: Engine, app: FastAPI) -> None:
    admin = _first_release(live_server, engine)
    reader = live_server.client("read", name="test")
    dev_ids = _manifest_ids(reader, "1")["dev"]
    cache = _cache(app)
    assert cache.size == 0

    with _released_row_queries(engine) as queries:
        first = reader.get(ITEMS.format(ref="latest"))
    assert first.status_code == 200 and queries, "the first read builds its answer from the released rows"
    assert set(_body_ids(first)) == dev_ids and cache.size == len(first.content)
    with _released_row_queries(engine) as queries:
        second = reader.get(ITEMS.format(ref="latest"))
    assert second.status_code == 200 and queries == []
    assert second.content == first.content and second.headers["etag"] == first.headers["etag"]
    assert second.headers["cache-control"] == first.headers["cache-control"] == "no-cache"
    assert cache.size == len(first.content)

    # Another reader, another token: the same answer, audited under its own actor.
    other = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {live_server.token('read', name='other')}"}, timeout=30)
    third = other.get(ITEMS.format(ref="latest"))
    assert third.content == first.content

    events = _reads(engine, "release.items_read")
    assert [event.actor for event in events] == ["token:test", "token:test", "token:other"]
    for entry in events:
        assert (entry.object_id, entry.count, entry.details["item_ids"], entry.details["split"]) == ("ops/1", len(dev_ids), sorted(dev_ids), "dev")
        assert entry.details["endpoint"] == "GET /v1/evals/ops/releases/latest/items"

    # A revalidation answers 304 with no body and leaves no audit event, cached or not.
    revalidated = reader.get(ITEMS.format(ref="latest"), headers={"If-None-Match": first.headers["etag"]})
    assert revalidated.status_code == 304 and revalidated.content == b"" and revalidated.headers["etag"] == first.headers["etag"]
    numbered = reader.get(ITEMS.format(ref="1"))
    assert numbered.status_code == 200 and numbered.headers["cache-control"].endswith("immutable") and set(_body_ids(numbered)) == dev_ids
    assert reader.get(ITEMS.format(ref="1"), headers={"If-None-Match": numbered.headers["etag"]}).status_code == 304
    events = _reads(engine, "release.items_read")
    assert len(events) == 4 and events[-1].details["endpoint"] == "GET /v1/evals/ops/releases/1/items"

    # The export: the first answer is streamed, the second comes from memory; same bytes, same headers.
    by_digest = _digests(reader, "1")
    with _released_row_queries(engine) as queries:
        streamed = reader.get(EXPORT.format(ref="1"))
    assert streamed.status_code == 200 and queries and "content-length" not in streamed.headers
    with _released_row_queries(engine) as queries:
        kept = reader.get(EXPORT.format(ref="1"))
    assert kept.status_code == 200 and queries == []
    assert kept.content == streamed.content
    assert {name: kept.headers.get(name) for name in KEPT_HEADERS} == {name: streamed.headers.get(name) for name in KEPT_HEADERS}
    assert streamed.headers["content-disposition"] == 'attachment; filename="ops-1-dev.jsonl"'
    assert streamed.headers["cache-control"].endswith("immutable") and streamed.headers["content-type"].startswith("application/x-ndjson")
    exported = _export_ids(streamed, by_digest)
    assert set(exported) == dev_ids and len(exported) == len(dev_ids)
    assert reader.get(EXPORT.format(ref="1"), headers={"If-None-Match": kept.headers["etag"]}).status_code == 304
    exports = _reads(engine, "release.export")
    assert len(exports) == 2 and all(entry.details["item_ids"] == sorted(exported) and entry.object_id == "ops/1" for entry in exports)
    assert admin.get(ITEMS.format(ref="1")).content == numbered.content


def test_a_filtered_read_is_its_own_answer(live_server: LiveServer, engine: Engine, app: FastAPI) -> None:
    _first_release(live_server, engine)
    reader = live_server.client("read")
    whole = reader.get(ITEMS.format(ref="1"))
    dates = sorted({item["content"]["occurred_at"][:10] for item in whole.json()["items"]})
    assert len(dates) >= 2
    cutoff = dates[len(dates) // 2]
    after = {"occurred_after": f"{cutoff}T00:00:00Z"}
    filtered = reader.get(ITEMS.format(ref="1"), params=after)
    assert whole.status_code == filtered.status_code == 200
    assert filtered.content != whole.content and filtered.headers["etag"] != whole.headers["etag"]
    later = [item for item in whole.json()["items"] if item["content"]["occurred_at"] >= cutoff]
    assert 0 < len(later) < len(whole.json()["items"]) and filtered.json()["items"] == later
    assert reader.get(ITEMS.format(ref="1"), params=after).content == filtered.content
    assert reader.get(ITEMS.format(ref="1")).content == whole.content

    with _released_row_queries(engine) as queries:
        filtered_export = reader.get(EXPORT.format(ref="1"), params=after)
    assert queries and filtered_export.status_code == 200
    lines = filtered_export.text.splitlines()
    assert len(lines) == len(later) and all(json.loads(line)["occurred_at"] >= f"{cutoff}T00:00:00+00:00" for line in lines)
    assert reader.get(EXPORT.format(ref="1"), params=after).content == filtered_export.content
    assert len(reader.get(EXPORT.format(ref="1")).text.splitlines()) == len(whole.json()["items"])

    events = _reads(engine, "release.items_read")
    filtered_ids = sorted(item["item_id"] for item in later)
    assert [entry.details["item_ids"] for entry in events] == [sorted(_body_ids(whole)), filtered_ids, filtered_ids, sorted(_body_ids(whole))]
    assert [entry.details["item_ids"] for entry in _reads(engine, "release.export")] == [filtered_ids, filtered_ids, sorted(_body_ids(whole))]


def test_latest_follows_a_new_release_and_a_withdrawal_at_once(live_server: LiveServer, engine: Engine) -> None:
    admin = _first_release(live_server, engine)
    reader = live_server.client("read")
    first = reader.get(ITEMS.format(ref="latest"))
    first_export = reader.get(EXPORT.format(ref="latest"))
    assert first.json()["release"] == 1 and json.loads(first_export.text.splitlines()[0])["metadata"]["release"] == 1
    assert reader.get(ITEMS.format(ref="latest")).content == first.content
    assert reader.get(EXPORT.format(ref="latest")).content == first_export.content

    _second_release(admin, engine)
    dev_two = _manifest_ids(reader, "2")["dev"]
    second = reader.get(ITEMS.format(ref="latest"))
    assert second.json()["release"] == 2 and set(_body_ids(second)) == dev_two and second.headers["etag"] != first.headers["etag"]
    assert reader.get(ITEMS.format(ref="latest"), headers={"If-None-Match": first.headers["etag"]}).status_code == 200
    second_export = reader.get(EXPORT.format(ref="latest"))
    assert json.loads(second_export.text.splitlines()[0])["metadata"]["release"] == 2
    assert set(_export_ids(second_export, _digests(reader, "2"))) == dev_two
    numbered = reader.get(ITEMS.format(ref="2"))
    assert numbered.headers["cache-control"].endswith("immutable") and set(_body_ids(numbered)) == dev_two
    numbered_export = reader.get(EXPORT.format(ref="2"))
    assert numbered_export.headers["cache-control"].endswith("immutable")

    withdrawn = admin.post("/v1/evals/ops/releases/2/withdraw", json={"reason": "wrong period"})
    assert withdrawn.status_code == 200, withdrawn.text
    again = reader.get(ITEMS.format(ref="latest"))
    assert again.json()["release"] == 1 and again.content == first.content and again.headers["etag"] == first.headers["etag"]
    assert json.loads(reader.get(EXPORT.format(ref="latest")).text.splitlines()[0])["metadata"]["release"] == 1
    marked = reader.get(ITEMS.format(ref="2"))
    assert marked.status_code == 200 and marked.headers["cache-control"] == "no-cache" and set(_body_ids(marked)) == dev_two
    assert reader.get(ITEMS.format(ref="2")).headers["cache-control"] == "no-cache"
    assert reader.get(EXPORT.format(ref="2")).headers["cache-control"] == "no-cache"

    latest_reads = [entry.object_id for entry in _reads(engine, "release.items_read") if entry.details["endpoint"].endswith("/latest/items")]
    assert latest_reads == ["ops/1", "ops/1", "ops/2", "ops/2", "ops/1"]


def test_sealed_reads_are_never_cached_and_always_counted(live_server: LiveServer, engine: Engine, app: FastAPI) -> None:
    _first_release(live_server, engine)
    reader, sealed = live_server.client("read"), live_server.client("read", "sealed")
    ids = _manifest_ids(reader, "1")
    dev = reader.get(ITEMS.format(ref="1"))
    dev_export = reader.get(EXPORT.format(ref="1"))
    assert reader.get(ITEMS.format(ref="1")).content == dev.content
    cache = _cache(app)
    held = cache.size
    assert held == len(dev.content) + len(dev_export.content)

    items = sealed.get(ITEMS.format(ref="1"), params={"split": "sealed"})
    assert items.status_code == 200 and set(_body_ids(items)) == ids["sealed"] and items.content != dev.content
    assert items.headers["cache-control"] == "no-store" and "etag" not in items.headers
    export = sealed.get(EXPORT.format(ref="1"), params={"split": "sealed"})
    assert export.status_code == 200 and export.headers["cache-control"] == "no-store"
    assert set(_export_ids(export, _digests(reader, "1"))) == ids["sealed"]
    assert cache.size == held

    refused = sealed.get(ITEMS.format(ref="1"), params={"split": "sealed"})
    assert refused.status_code == 403 and (refused.json()["budget"], refused.json()["used"]) == (2, 2)
    assert sealed.get(EXPORT.format(ref="1"), params={"split": "sealed"}).status_code == 403
    assert sealed.get(ITEMS.format(ref="1")).content == dev.content  # the dev answer is still served
    with Session(engine) as session:
        assert len(session.exec(select(SealedRead)).all()) == 2
    sealed_events = _reads(engine, "release.sealed_items_read", "release.sealed_export")
    assert [(entry.action, entry.details["item_ids"]) for entry in sealed_events] == [
        ("release.sealed_items_read", sorted(ids["sealed"])),
        ("release.sealed_export", sorted(ids["sealed"])),
    ]
    assert len(_reads(engine, "release.sealed_refused")) == 2


def test_with_the_cache_off_the_answers_are_the_same(database_url: str, engine: Engine) -> None:
    settings = make_settings(database_url).model_copy(update={"release_cache_mb": 0})
    app = create_app(settings, engine=engine)
    with serve(app, engine, settings) as live_server:
        admin = _first_release(live_server, engine)
        reader = live_server.client("read")
        ids = _manifest_ids(reader, "1")
        cache: ReleaseContentCache = app.state.release_content_cache
        assert cache.max_bytes == 0

        with _released_row_queries(engine) as queries:
            first = reader.get(ITEMS.format(ref="latest"))
        assert first.status_code == 200 and set(_body_ids(first)) == ids["dev"] and queries
        with _released_row_queries(engine) as queries:
            second = reader.get(ITEMS.format(ref="latest"))
        assert queries and second.content == first.content and second.headers["etag"] == first.headers["etag"]
        assert reader.get(ITEMS.format(ref="latest"), headers={"If-None-Match": first.headers["etag"]}).status_code == 304
        exports = [reader.get(EXPORT.format(ref="1")) for _ in range(2)]
        assert exports[0].content == exports[1].content and set(_export_ids(exports[0], _digests(reader, "1"))) == ids["dev"]
        assert exports[0].headers["etag"] == exports[1].headers["etag"]
        assert cache.size == 0

        _second_release(admin, engine)
        assert reader.get(ITEMS.format(ref="latest")).json()["release"] == 2
        assert admin.post("/v1/evals/ops/releases/2/withdraw", json={"reason": "wrong period"}).status_code == 200
        assert reader.get(ITEMS.format(ref="latest")).content == first.content
        assert reader.get(ITEMS.format(ref="2")).headers["cache-control"] == "no-cache"
        assert cache.size == 0

        events = _reads(engine, "release.items_read")
        assert [entry.object_id for entry in events] == ["ops/1", "ops/1", "ops/2", "ops/1", "ops/2"]
        assert all(entry.details["item_ids"] == sorted(ids["dev"]) for entry in events[:2])
        assert [entry.details["item_ids"] for entry in _reads(engine, "release.export")] == [sorted(ids["dev"])] * 2
