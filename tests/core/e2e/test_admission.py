"""What the guard refuses before a body is read, and the edges of the input it reads, over a real
socket on both databases: a token without the route's scope, a malformed webhook signature and an
oversized sign-in form are answered at once while the client is still sending; webhook signature
headers of any shape are a 401, never a 500; JSON Lines pushes reject a bad line alone; a byte order
mark is read; repeated keys, encoded bodies and media types a route does not read are refused."""

from __future__ import annotations

import codecs
import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest
from sqlmodel import Session, select

from schemas.item import Item
from service.sources.webhooks import SIGNATURE_HEADER, sign
from tests.conftest import LiveServer

PROBLEM = "application/problem+json"
DECLARED = 900_000
"""A body length under the tests' 1 MiB limit, of which only a few bytes are ever sent."""


def _record(external_id: str) -> dict[str, object]:
    return {"external_id": external_id, "occurred_at": "2024-06-01T12:00:00Z", "title": f"incident {external_id}", "input": f"why {external_id}?"}


def _create_source(server: LiveServer, name: str = "ops") -> str:
    with server.client("admin") as admin:
        response = admin.post("/v1/sources", json={"name": name, "kind": "push"})
    assert response.status_code == 201, response.text
    secret: str = response.json()["webhook_secret"]
    return secret


def _signed(secret: str, body: bytes) -> dict[str, str]:
    return {SIGNATURE_HEADER: sign(body, secret=secret, timestamp=int(time.time())), "Content-Type": "application/json"}


def _external_ids(server: LiveServer) -> set[str]:
    with Session(server.engine) as session:
        return {item.external_id for item in session.exec(select(Item))}


def _answer_while_sending(server: LiveServer, method: str, path: str, headers: dict[str, str]) -> tuple[int, bytes, float]:
    """Send the headers of a request declaring a body of `DECLARED` bytes and only its first 64
    bytes; the status and head of the answer, and the seconds it took. A server that waited for
    the rest of the body would never answer (the read times out)."""
    address = urlsplit(server.url)
    assert address.hostname is not None and address.port is not None
    lines = [f"{method} {path} HTTP/1.1", f"Host: {address.hostname}", f"Content-Length: {DECLARED}", *(f"{name}: {value}" for name, value in headers.items())]
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        started = time.monotonic()
        connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + b"[" + b" " * 63)
        head = connection.recv(65536)
        took = time.monotonic() - started
    return int(head.split(b" ", 2)[1]), head, took


def test_a_token_without_the_route_scope_is_refused_before_its_body_is_sent(live_server: LiveServer) -> None:
    _create_source(live_server)
    reader = live_server.token("read")
    status, head, took = _answer_while_sending(live_server, "POST", "/v1/sources/ops/items", {"Authorization": f"Bearer {reader}", "Content-Type": "application/json"})
    assert status == 403 and b"'ingest' scope" in head and took < 5
    # A route whose scope depends on what is asked still refuses a token with none of its scopes.
    ingester = live_server.token("ingest")
    status, head, _ = _answer_while_sending(live_server, "POST", "/v1/evals/ops/runs", {"Authorization": f"Bearer {ingester}", "Content-Type": "application/json"})
    assert status == 403 and b"'read' or 'sealed' scope" in head


def test_a_malformed_webhook_signature_is_refused_before_the_body_is_sent(live_server: LiveServer) -> None:
    _create_source(live_server)
    status, head, took = _answer_while_sending(live_server, "POST", "/v1/sources/ops/webhook", {SIGNATURE_HEADER: "t=" + "9" * 5000, "Content-Type": "application/json"})
    assert status == 401 and b"must look like" in head and took < 5


def test_the_sign_in_form_reads_a_small_body_only(live_server: LiveServer) -> None:
    status, head, took = _answer_while_sending(live_server, "POST", "/ui/login", {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 413 and b"8192 bytes" in head and took < 5
    with httpx.Client(base_url=live_server.url, timeout=30) as browser:
        streamed = browser.post("/ui/login", content=iter([b"token=" + b"a" * 4096] * 4), headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert streamed.status_code == 413


@pytest.mark.parametrize(
    "header",
    [
        b"t=" + b"9" * 5000 + b",v1=" + b"0" * 64,
        "t=１２３,v1=ｆｆ".encode(),  # fullwidth digits: digits to str.isdigit, not to the format
        "t=1700000000,v1=é".encode("latin-1"),
        b"t=\xb2,v1=" + b"0" * 64,  # superscript two in Latin-1
        b"",
        b",".join([b"v1=" + b"0" * 64] * 500),
        b"t=1700000000," + b",".join([b"x=y"] * 600),
        b"t=1,t=2,v1=" + b"0" * 64,
        b"v1=" + b"0" * 64,
    ],
    ids=["5000-digits", "fullwidth", "latin-1", "superscript", "empty", "500-signatures", "many-parts", "two-timestamps", "no-timestamp"],
)
def test_any_signature_header_is_a_401_never_a_500(live_server: LiveServer, header: bytes) -> None:
    secret = _create_source(live_server)
    body = json.dumps(_record("W-1")).encode()
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        refused = client.post("/v1/sources/ops/webhook", content=body, headers=[(SIGNATURE_HEADER.encode(), header), (b"Content-Type", b"application/json")])
        assert refused.status_code == 401 and refused.headers["content-type"] == PROBLEM, refused.text
        # The connection and the server are fine: a good delivery goes through next.
        good = client.post("/v1/sources/ops/webhook", content=body, headers=_signed(secret, body))
        assert good.status_code == 200, good.text
    assert _external_ids(live_server) == {"W-1"}


def test_the_signature_header_is_in_the_openapi_document(live_server: LiveServer) -> None:
    document = httpx.get(f"{live_server.url}/openapi.json").json()
    webhook = document["paths"]["/v1/sources/{name}/webhook"]["post"]
    [header] = [parameter for parameter in webhook["parameters"] if parameter["in"] == "header"]
    assert header["name"] == SIGNATURE_HEADER and header["required"] is True and header["schema"]["maxLength"] == 1024
    push = document["paths"]["/v1/sources/{name}/items"]["post"]
    assert {"application/json", "application/x-ndjson", "application/jsonl", "application/x-jsonlines"} == set(push["requestBody"]["content"])
    assert {"415", "429"} <= set(push["responses"]) and "429" not in document["paths"]["/healthz"]["get"]["responses"]


def test_a_json_lines_push_rejects_a_bad_line_alone(live_server: LiveServer) -> None:
    _create_source(live_server)
    lines = [json.dumps(_record("L-1")).encode(), b'{"external_id": "L-2", "title": "\xff\xfe broken"}', json.dumps(_record("L-3")).encode()]
    with live_server.client("ingest") as client:
        pushed = client.post("/v1/sources/ops/items", content=codecs.BOM_UTF8 + b"\n".join(lines), headers={"Content-Type": "application/x-ndjson"})
    assert pushed.status_code == 422, pushed.text
    [error] = pushed.json()["errors"]
    assert (error["position"], error["locator"], error["reason"]) == (2, "line 2", "invalid_utf8")
    assert _external_ids(live_server) == {"L-1", "L-3"}


def test_a_byte_order_mark_is_read_and_repeated_keys_cost_their_record(live_server: LiveServer) -> None:
    secret = _create_source(live_server)
    array = json.dumps([_record("A-1"), _record("A-2")]).encode()
    repeated = b"[" + json.dumps(_record("A-3")).encode() + b', {"external_id": "A-4", "title": "t", "input": "i", "title": "u", "occurred_at": "2024-06-01T12:00:00Z"}]'
    with live_server.client("ingest") as client:
        assert client.post("/v1/sources/ops/items", content=codecs.BOM_UTF8 + array, headers={"Content-Type": "application/json"}).status_code == 200
        pushed = client.post("/v1/sources/ops/items", content=repeated, headers={"Content-Type": "application/json"})
    assert pushed.status_code == 422
    [error] = pushed.json()["errors"]
    assert error["position"] == 1 and error["reason"] == "duplicate_key" and "'title'" in error["detail"]
    # A webhook of one object holding a key twice is refused whole, naming the key.
    body = b'{"external_id": "W-1", "external_id": "W-2"}'
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        hooked = client.post("/v1/sources/ops/webhook", content=body, headers=_signed(secret, body))
    assert hooked.status_code == 422 and "'external_id' more than once" in hooked.json()["detail"]
    assert _external_ids(live_server) == {"A-1", "A-2", "A-3"}


def test_a_json_body_with_a_repeated_key_is_refused_naming_it_and_where(live_server: LiveServer) -> None:
    with live_server.client("admin") as admin:
        top = admin.post("/v1/sources", content=b'{"name": "a", "kind": "push", "name": "b"}', headers={"Content-Type": "application/json"})
        nested = admin.post("/v1/sources", content=b'{"name": "a", "kind": "push", "mapping": {"title": "x", "title": "y"}}', headers={"Content-Type": "application/json"})
        with_mark = admin.post("/v1/sources", content=codecs.BOM_UTF8 + b'{"name": "marked", "kind": "push"}', headers={"Content-Type": "application/json"})
    assert top.status_code == 422 and top.json()["detail"].startswith("body: has the key 'name' more than once")
    assert nested.status_code == 422 and nested.json()["detail"].startswith("body.mapping: has the key 'title' more than once")
    assert with_mark.status_code == 201, with_mark.text


def test_encoded_bodies_and_media_types_a_route_does_not_read_are_415(live_server: LiveServer) -> None:
    _create_source(live_server)
    with live_server.client("admin") as admin:
        gzipped = admin.post("/v1/sources/ops/items", content=b"\x1f\x8b\x08\x00", headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
        assert gzipped.status_code == 415 and "'gzip'" in gzipped.json()["detail"]
        text = admin.post("/v1/sources", content=b'{"name": "x", "kind": "push"}', headers={"Content-Type": "text/plain"})
        assert text.status_code == 415 and "application/json" in text.json()["detail"] and "'text/plain'" in text.json()["detail"]
        csv = admin.post("/v1/sources/ops/items", content=b"a,b\n1,2\n", headers={"Content-Type": "text/csv"})
        assert csv.status_code == 415 and "application/x-ndjson" in csv.json()["detail"]
        # Every media type the push route documents is read; so is a body without a type (as JSON).
        lines = json.dumps(_record("J-1")).encode()
        assert admin.post("/v1/sources/ops/items", content=lines, headers={"Content-Type": "application/jsonl"}).status_code == 200
        assert admin.post("/v1/sources/ops/items", content=b"[]", headers={"Content-Type": "application/vnd.example+json"}).status_code == 200
        untyped = admin.post("/v1/sources/ops/items", content=b"[]")
        assert "content-type" not in untyped.request.headers and untyped.status_code == 200, untyped.text
