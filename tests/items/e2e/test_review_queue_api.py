"""The review queue, the sealed review window and undoing a review decision over a real HTTP server,
on every backend: the queue's order, positions, total and filters (LIKE's special characters taken
literally); sealed-bound items withheld until a token with `sealed` opens a budgeted window, every
opening and read audited; a decision undone only by its taker and only until a release acted on it."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.item import Item
from schemas.token import ApiToken
from service.items.shaping import withheld
from tests.conftest import TEST_SECRET_KEY, LiveServer
from tests.eval_support import ingest_and_curate
from tests.eval_support import item_ids_by_external_id as _ids
from tests.evals.integration.test_refresh import kev

PROBLEM = "application/problem+json"
NOTE_TITLES = {
    "NOTE-1": "Disk at 100% on node_a",
    "NOTE-2": "Disk at 1000 on nodeXa",
    "NOTE-3": "Quota 50_50 split on a/b path",
    "NOTE-4": "Quota 50x50 split on ab path",
}
NOTE_TEXTS = {
    "NOTE-1": "The data volume filled up overnight and writes failed.",
    "NOTE-2": "A counter overflowed in the billing exporter after the upgrade.",
    "NOTE-3": "Traffic was split evenly between two regions by mistake.",
    "NOTE-4": "The scheduler placed every replica in one availability zone.",
}


def _statuses(engine: Engine) -> dict[int, str]:
    with Session(engine) as session:
        return {item.id: item.status for item in session.exec(select(Item)) if item.id is not None}


def _token_id(engine: Engine, name: str) -> int:
    with Session(engine) as session:
        token = session.exec(select(ApiToken).where(ApiToken.name == name)).one()
    assert token.id is not None
    return token.id


_TOKENS: dict[tuple[str, str], str] = {}


def _client(server: LiveServer, name: str, *scopes: str) -> httpx.Client:
    """A client with the token named `name` of this server's database (made on first use: names
    are unique among active tokens)."""
    key = (server.engine.url.render_as_string(hide_password=True), name)
    if key not in _TOKENS:
        _TOKENS[key] = server.token(*scopes, name=name)
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {_TOKENS[key]}"}, timeout=30)


def _events(admin: httpx.Client, action: str, **params: Any) -> list[dict[str, Any]]:
    """Audit events of `action`, oldest first."""
    answer = admin.get("/v1/audit", params={"action": action, "limit": 500, **params})
    assert answer.status_code == 200, answer.text
    events: list[dict[str, Any]] = answer.json()["events"]
    return events[::-1]


def _pool(server: LiveServer) -> dict[str, int]:
    """20 KEV incidents, ingested newest first (ids run against dates), and four notes whose titles
    hold LIKE's special characters; eval `ops` seals about half the KEV items, `all` takes both
    sources and seals nothing."""
    ingest_and_curate(server.engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(20, 0, -1)])
    notes = [{**kev(90 + n, f"2024-03-0{n}", NOTE_TEXTS[f"NOTE-{n}"]), "cveID": f"NOTE-{n}", "vulnerabilityName": NOTE_TITLES[f"NOTE-{n}"]} for n in range(1, 5)]
    ingest_and_curate(server.engine, "notes", notes)
    ids = _ids(server.engine)
    assert set(_statuses(server.engine).values()) == {"unique"}
    with _client(server, "admin", "admin") as admin:
        for definition in (
            {"name": "ops", "sources": ["kev"], "sealed_fraction": 0.5, "sealed_read_budget": 1},
            {"name": "all", "sources": ["kev", "notes"], "sealed_fraction": 0.0},
        ):
            assert admin.post("/v1/evals", json=definition).status_code == 201
    return ids


def _sealed(server: LiveServer, item_ids: list[int]) -> set[int]:
    with Session(server.engine) as session:
        return withheld(session=session, item_ids=item_ids, secret_key=TEST_SECRET_KEY)


def _queue(client: httpx.Client, name: str, **params: Any) -> dict[str, Any]:
    answer = client.get(f"/v1/evals/{name}/review-queue", params=params)
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    body: dict[str, Any] = answer.json()
    return body


def test_the_queue_is_oldest_first_numbered_and_filtered(live_server: LiveServer) -> None:
    ids = _pool(live_server)
    kev_ids = [ids[f"CVE-2024-{n:04d}"] for n in range(1, 21)]  # oldest incident first
    sealed = _sealed(live_server, kev_ids)
    assert 0 < len(sealed) < 20
    curator = _client(live_server, "carol", "curate")
    admin = _client(live_server, "admin", "admin")

    first = _queue(curator, "all", limit=5)
    assert (first["eval"], first["total"], first["offset"], first["limit"]) == ("all", 24, 0, 5)
    assert [(entry["position"], entry["id"]) for entry in first["entries"]] == list(enumerate(kev_ids[:5], start=1))
    second = _queue(curator, "all", limit=5, offset=5)
    assert [(entry["position"], entry["id"]) for entry in second["entries"]] == list(enumerate(kev_ids[5:10], start=6))
    everything_page = _queue(curator, "all", limit=500)
    everything = everything_page["entries"]
    assert [entry["id"] for entry in everything] == kev_ids + [ids[f"NOTE-{n}"] for n in range(1, 5)]
    for entry in everything:
        assert (entry["sealed"], entry["withheld"]) == ((entry["id"] in sealed,) * 2)
        if entry["withheld"]:
            assert (entry["title"], entry["input"], entry["reference"], entry["external_id"], entry["metadata"], entry["tags"]) == ("", "", "", "", {}, [])
            assert (entry["source"], entry["status"], entry["occurred_at"][:10]) == ("kev", "unique", f"2024-02-{kev_ids.index(entry['id']) + 1:02d}")
            assert entry["dedup"]["status"] == "unique" and entry["dedup"]["matched_item_id"] is None
        else:
            assert entry["title"] and entry["input"] and entry["external_id"]
    assert first["withheld"] == len([entry for entry in first["entries"] if entry["withheld"]])
    assert (first["note"] is not None) == (first["withheld"] > 0) and first["sealed_review_until"] is None

    # What was served with content is audited: one event per page that served any, naming the items shown.
    served = [sorted(entry["id"] for entry in page["entries"] if not entry["withheld"]) for page in (first, second, everything_page)]
    reads = _events(admin, "item.read", actor="token:carol")
    assert [event["details"]["item_ids"] for event in reads] == [page_ids for page_ids in served if page_ids]
    assert {event["details"]["endpoint"] for event in reads} == {"GET /v1/evals/all/review-queue"}

    # Filters: one source, a date range, text.
    notes = _queue(curator, "all", source="notes")
    assert (notes["total"], [entry["external_id"] for entry in notes["entries"]]) == (4, ["NOTE-1", "NOTE-2", "NOTE-3", "NOTE-4"])
    unknown = curator.get("/v1/evals/all/review-queue", params={"source": "jira"})
    assert unknown.status_code == 422 and unknown.headers["content-type"].startswith(PROBLEM) and "kev, notes" in unknown.json()["detail"]
    dated = _queue(curator, "all", occurred_after="2024-02-05T00:00:00Z", occurred_before="2024-02-10T00:00:00+00:00")
    assert (dated["total"], [entry["id"] for entry in dated["entries"]]) == (5, kev_ids[4:9])
    assert [entry["position"] for entry in dated["entries"]] == [1, 2, 3, 4, 5]

    def matches(text: str) -> list[str]:
        page = _queue(curator, "all", text=text)
        assert page["total"] == len(page["entries"])
        return [entry["external_id"] for entry in page["entries"]]

    assert matches("100% on node_a") == ["NOTE-1"]  # not NOTE-2: % and _ are no wildcards
    assert matches("disk AT 100") == ["NOTE-1", "NOTE-2"]  # any case
    assert matches("%") == ["NOTE-1"]
    assert matches("_") == ["NOTE-1", "NOTE-3"]
    assert matches("50_50") == ["NOTE-3"]
    assert matches("a/b") == ["NOTE-3"]  # the escape character itself
    assert matches("regions by mistake") == ["NOTE-3"]  # the input as well as the title
    assert matches("no such words") == []
    # Text never matches a withheld item: KEV titles all hold "flaw number".
    flaws = _queue(curator, "ops", text="flaw number", limit=500)
    assert flaws["total"] == 20 - len(sealed) and {entry["id"] for entry in flaws["entries"]} == set(kev_ids) - sealed
    assert "the text filter matches only items whose content this reader may see" in flaws["note"]

    assert curator.get("/v1/evals/nope/review-queue").status_code == 404
    with _client(live_server, "reader", "read") as reader:
        assert reader.get("/v1/evals/all/review-queue").status_code == 403
    for bad in ({"limit": 0}, {"limit": 501}, {"offset": -1}, {"occurred_after": "2024-02-05"}, {"text": ""}):
        assert curator.get("/v1/evals/all/review-queue", params=bad).status_code == 422, bad
    # A decided item leaves the queue.
    assert curator.post(f"/v1/items/{ids['NOTE-1']}/approve").status_code == 200
    assert _queue(curator, "all", source="notes")["total"] == 3
    curator.close()
    admin.close()


def test_sealed_bound_items_are_shown_in_full_only_in_a_budgeted_window(live_server: LiveServer) -> None:
    ids = _pool(live_server)
    kev_ids = [ids[f"CVE-2024-{n:04d}"] for n in range(1, 21)]
    sealed = _sealed(live_server, kev_ids)
    admin = _client(live_server, "admin", "admin")
    curator = _client(live_server, "carol", "curate")
    keeper = _client(live_server, "sam", "curate", "sealed")
    other = _client(live_server, "sue", "curate", "sealed")

    before = _queue(keeper, "ops", limit=500)
    assert before["withheld"] == len(sealed) and before["sealed_review_until"] is None
    assert "sealed review window" in before["note"]

    refused = curator.post("/v1/evals/ops/sealed-review")
    assert refused.status_code == 403 and refused.headers["content-type"].startswith(PROBLEM) and "'sealed' scope" in refused.json()["detail"]
    assert keeper.post("/v1/evals/nope/sealed-review").status_code == 404
    opened = keeper.post("/v1/evals/ops/sealed-review")
    assert opened.status_code == 201, opened.text
    window = opened.json()
    assert (window["eval"], window["opened"], window["budget"], window["used"]) == ("ops", True, 1, 1)
    assert opened.headers["cache-control"] == "no-store"

    shown = _queue(keeper, "ops", limit=500)
    assert (shown["withheld"], shown["note"], shown["sealed_review_until"]) == (0, None, window["until"])
    for entry in shown["entries"]:
        assert entry["sealed"] == (entry["id"] in sealed) and not entry["withheld"] and entry["title"] and entry["input"]
    assert _queue(keeper, "ops", text="flaw number")["total"] == 20  # now the text filter sees them too

    # Asking again while it is open returns the window and counts nothing.
    again = keeper.post("/v1/evals/ops/sealed-review")
    assert again.status_code == 200 and again.json() == {**window, "opened": False}
    # The budget is spent: another token gets no window; the window belongs to the token that opened it.
    spent = other.post("/v1/evals/ops/sealed-review")
    assert spent.status_code == 403 and spent.headers["content-type"].startswith(PROBLEM)
    assert "budget" in spent.json()["detail"] and (spent.json()["budget"], spent.json()["used"]) == (1, 1)
    assert _queue(other, "ops", limit=500)["withheld"] == len(sealed)
    assert _queue(curator, "ops", limit=500)["withheld"] == len(sealed)

    [opening] = _events(admin, "eval.sealed_review_opened")
    assert (opening["actor"], opening["object_id"], opening["details"]["token_id"]) == ("token:sam", "ops", _token_id(live_server.engine, "sam"))
    [refusal] = _events(admin, "eval.sealed_review_refused")
    assert (refusal["actor"], refusal["object_id"], refusal["details"]["token_id"]) == ("token:sue", "ops", _token_id(live_server.engine, "sue"))
    reads = _events(admin, "item.sealed_review_read")
    assert reads and all((event["actor"], event["object_id"]) == ("token:sam", "ops") for event in reads)
    assert set(reads[0]["details"]["item_ids"]) == sealed and reads[0]["details"]["windows"] == ["ops"]
    assert reads[0]["sealed"] is True
    for client in (admin, curator, keeper, other):
        client.close()


def test_a_decision_is_undone_by_its_taker_until_a_release_acts_on_it(live_server: LiveServer) -> None:
    ids = _pool(live_server)
    first, second, third = ids["CVE-2024-0001"], ids["CVE-2024-0002"], ids["CVE-2024-0003"]
    admin = _client(live_server, "admin", "admin")
    alice = _client(live_server, "alice", "curate", "sealed")  # which items are sealed-bound differs each run: both may read them
    bob = _client(live_server, "bob", "curate", "sealed")  # it approves a sealed-bound item below: it may read it

    assert alice.post(f"/v1/items/{first}/approve", json={"reason": "clear"}).status_code == 200
    assert first not in {entry["id"] for entry in _queue(alice, "ops", limit=500)["entries"]}
    undone = alice.post(f"/v1/items/{first}/undo-review")
    assert undone.status_code == 200, undone.text
    body = undone.json()
    assert (body["item_id"], body["status"], body["undone"], body["reason"], body["decided_by"]) == (first, "unique", "approve", "clear", "token:alice")
    assert _statuses(live_server.engine)[first] == "unique"
    assert first in {entry["id"] for entry in _queue(alice, "ops", limit=500)["entries"]}  # back in the queue
    [event] = _events(admin, "item.review_undone")
    assert (event["actor"], event["object_id"], event["details"]["undone"], event["details"]["reason"]) == ("token:alice", str(first), "approve", "clear")

    def refusal(client: httpx.Client, item_id: int) -> tuple[int, str]:
        answer = client.post(f"/v1/items/{item_id}/undo-review")
        assert answer.headers["content-type"].startswith(PROBLEM)
        return answer.status_code, answer.json()["reason"]

    assert refusal(alice, first) == (409, "not_reviewed")  # undone already
    assert refusal(alice, third) == (409, "not_reviewed")  # never decided
    assert refusal(alice, 987654) == (404, "not_found")
    with _client(live_server, "reader", "read") as reader:
        assert reader.post(f"/v1/items/{first}/undo-review").status_code == 403

    # Only the decision's taker undoes it.
    assert alice.post(f"/v1/items/{second}/reject", json={"reason": "not gradable"}).status_code == 200
    assert refusal(bob, second) == (409, "not_yours")
    assert _statuses(live_server.engine)[second] == "rejected"
    assert alice.post(f"/v1/items/{second}/undo-review").json()["undone"] == "reject"
    # Decided again, by someone else: now theirs to undo.
    assert bob.post(f"/v1/items/{second}/approve").status_code == 200
    assert refusal(alice, second) == (409, "not_yours")

    # A release took the approval in: it stays.
    assert admin.post("/v1/evals/all/refresh", params={"at": "2024-04-05T00:00:00Z"}).status_code == 201
    assert refusal(bob, second) == (409, "released")
    assert _statuses(live_server.engine)[second] == "approved"
    assert [event["object_id"] for event in _events(admin, "item.review_undone")] == [str(first), str(second)]
    for client in (admin, alice, bob):
        client.close()


def test_no_sealed_bound_item_is_approved_by_a_token_that_cannot_read_it(live_server: LiveServer) -> None:
    ids = _pool(live_server)
    kev_ids = [ids[f"CVE-2024-{n:04d}"] for n in range(1, 21)]
    sealed = sorted(_sealed(live_server, kev_ids))
    plain = [item_id for item_id in kev_ids if item_id not in sealed]
    assert len(sealed) >= 3 and len(plain) >= 2
    carol = _client(live_server, "carol", "curate")
    refused = carol.post(f"/v1/items/{sealed[0]}/approve")
    assert refused.status_code == 409 and refused.json()["reason"] == "unread" and "not approved unread" in refused.json()["detail"]
    assert carol.post(f"/v1/items/{plain[0]}/approve").status_code == 200
    # Rejecting needs no reading of the text: the item stays out either way.
    assert carol.post(f"/v1/items/{sealed[1]}/reject", json={"reason": "out of scope"}).status_code == 200
    batch = carol.post("/v1/items/review", json={"decisions": [{"item_id": sealed[2], "decision": "approve"}, {"item_id": plain[1], "decision": "approve"}]}).json()
    assert batch["approved"] == [plain[1]] and [(error["position"], error["reason"]) for error in batch["errors"]] == [(0, "unread")]
    statuses = _statuses(live_server.engine)
    assert statuses[sealed[0]] == statuses[sealed[2]] == "unique"
    dave = _client(live_server, "dave", "curate", "sealed")
    assert dave.post(f"/v1/items/{sealed[0]}/approve").status_code == 200
    assert _statuses(live_server.engine)[sealed[0]] == "approved"
