"""OpenTelemetry tracing (docs/metrics-and-logs.md, "Traces"), end to end: real `goldenset serve` and `goldenset
scheduler` processes export OTLP/HTTP protobuf to a receiver on loopback, which decodes what a
collector would get. Server spans per route with their status, SQL spans inside them, the resource
naming the service and its role, log lines carrying the ids of their span, and nothing an
attacker could use: no bearer token, item text, query string or exception message. Off, no
OpenTelemetry SDK, exporter or instrumentation is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from sqlalchemy import text
from sqlalchemy.engine import Engine

from service.core.db import write_transaction
from service.core.tokens import create_token
from tests.conftest import REPO_ROOT, TEST_SECRET_KEY
from tests.dedup_support import hadoop_reports, ingest
from tests.processes import start_scheduler, start_serve

ITEM = {
    "external_id": "ext-Tr71",
    "occurred_at": "2025-03-01T10:00:00Z",
    "title": "Quasar-Vb52 payment outage",
    "input": "customer Hy38 saw refunds fail after the deploy",
    "reference": "rolled back release Kd94",
}
# The database refuses this one inside its INSERT; PostgreSQL's error quotes the title.
REFUSED = {**ITEM, "external_id": "ext-Nb16", "title": "Nebula-Zq63 login outage"}
ITEM_FRAGMENTS = ("Tr71", "Quasar", "Vb52", "Hy38", "Kd94", "refunds fail", "Nb16", "Nebula", "Zq63")
SERVER = SpanProto.SpanKind.SPAN_KIND_SERVER
STATUS_ERROR = 2
SQL_SCOPE = "opentelemetry.instrumentation.sqlalchemy"


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    scope: str
    status: int
    status_message: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]

    def texts(self) -> list[str]:
        """Every string this span carries: its name, status message, attributes, events and resource."""
        values: list[Any] = [self.name, self.status_message, *self.attributes.values(), *self.resource.values()]
        values += [value for name, attributes in self.events for value in (name, *attributes.values())]
        return [str(value) for value in values]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    items: list[KeyValue] = list(pairs)
    return {pair.key: _value(pair.value) for pair in items}


@dataclass
class Receiver:
    """An OTLP/HTTP trace receiver on loopback: POST /v1/traces, protobuf."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def record(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            scope=scope_spans.scope.name,
                            status=span.status.code,
                            status_message=span.status.message,
                            attributes=_attributes(span.attributes),
                            resource=resource,
                            events=[(event.name, _attributes(event.attributes)) for event in span.events],
                        )
                    )

    def wait_for(self, found: Callable[[list[ReceivedSpan]], bool], seconds: float = 60) -> list[ReceivedSpan]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if found(list(self.spans)):
                return list(self.spans)
            time.sleep(0.1)
        raise AssertionError(f"the spans asked for never arrived; got {[span.name for span in self.spans]}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    received = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(404)
                self.end_headers()
                return
            received.record(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    received.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=received.server.serve_forever, daemon=True)
    thread.start()
    yield received
    received.server.shutdown()
    received.server.server_close()


def _exporting_to(receiver: Receiver, monkeypatch: pytest.MonkeyPatch, *, every_ms: int = 100) -> None:
    """Point the child processes' exporter at `receiver`, sending its batch every `every_ms`."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", str(every_ms))
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


def _ancestors(span: ReceivedSpan, spans: list[ReceivedSpan]) -> list[str]:
    by_id = {one.span_id: one for one in spans}
    chain: list[str] = []
    current = by_id.get(span.parent_id)
    while current is not None:
        chain.append(current.span_id)
        current = by_id.get(current.parent_id)
    return chain


def _json_lines(output: str) -> list[dict[str, Any]]:
    lines = []
    for line in output.splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def _status(span: ReceivedSpan) -> Any:
    return span.attributes.get("http.response.status_code", span.attributes.get("http.status_code"))


def _refuse_marked_items(engine: Engine) -> None:
    """Make the database fail inside the INSERT of an item whose title holds 'Nebula', with an
    error whose message quotes the title on PostgreSQL."""
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(
                text(
                    "CREATE FUNCTION refuse_marked_items() RETURNS trigger LANGUAGE plpgsql AS $$ "
                    "BEGIN IF NEW.title LIKE '%Nebula%' THEN PERFORM NEW.title::integer; END IF; RETURN NEW; END $$"
                )
            )
            connection.execute(text("CREATE TRIGGER refuse_marked_items BEFORE INSERT ON item FOR EACH ROW EXECUTE FUNCTION refuse_marked_items()"))
        else:
            connection.execute(text("CREATE TRIGGER refuse_marked_items BEFORE INSERT ON item WHEN NEW.title LIKE '%Nebula%' BEGIN SELECT json(NEW.title); END"))


def test_an_api_replica_traces_requests_with_their_sql_and_exports_no_token_nor_item_text(
    database_url: str, engine: Engine, tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refuse_marked_items(engine)
    with write_transaction(engine) as session:
        token, _ = create_token(session=session, name="tracer", scopes=["read", "ingest", "curate", "admin"])
    headers = {"Authorization": f"Bearer {token}"}
    # Nothing is sent on schedule while the test runs: every span arrives with the flush at SIGTERM.
    _exporting_to(receiver, monkeypatch, every_ms=600_000)
    replica = start_serve(database_url, tmp_path / "api.log", env={"OTEL_ENABLED": "true", "LOG_JSON": "true", "LOG_LEVEL": "INFO"})
    try:
        assert httpx.post(f"{replica.url}/v1/sources", json={"name": "ops"}, headers=headers, timeout=30).status_code == 201
        pushed = httpx.post(f"{replica.url}/v1/sources/ops/items", json=[ITEM], headers=headers, timeout=30)
        assert pushed.status_code in (200, 201), pushed.text
        refused = httpx.post(f"{replica.url}/v1/sources/ops/items", json=[REFUSED], headers=headers, timeout=30)
        assert refused.status_code >= 400 or refused.json()["new"] == 0, refused.text
        listing = httpx.get(f"{replica.url}/v1/items", params={"source": "ops", "limit": 5}, headers=headers, timeout=30)
        assert listing.status_code == 200 and listing.json()["items"][0]["title"] == ITEM["title"]
        assert httpx.get(f"{replica.url}/v1/items/987654", headers=headers, timeout=30).status_code == 404
        assert httpx.get(f"{replica.url}/healthz", timeout=30).status_code == 200
        assert receiver.spans == []
    finally:
        replica.stop()  # SIGTERM: the process exports what it still holds before it exits

    spans = receiver.wait_for(lambda spans: any(span.kind == SERVER and span.attributes.get("http.route") == "/v1/items/{item_id}" for span in spans), seconds=10)
    servers = {span.attributes["http.route"]: span for span in spans if span.kind == SERVER}
    assert len([span for span in spans if span.kind == SERVER]) == 5, "one server span per request: FastAPI's own telemetry adds none"
    assert set(servers) == {"/v1/sources", "/v1/sources/{name}/items", "/v1/items", "/v1/items/{item_id}"}, "one server span per request; /healthz is not traced"
    listed, missing = servers["/v1/items"], servers["/v1/items/{item_id}"]
    assert (listed.name, _status(listed)) == ("GET /v1/items", 200)
    assert (missing.name, _status(missing)) == ("GET /v1/items/{item_id}", 404)
    for request in (listed, missing):
        statements = [span for span in spans if span.scope == SQL_SCOPE and span.trace_id == request.trace_id]
        assert statements, f"no SQL spans in the trace of {request.name}"
        assert all(request.span_id in _ancestors(statement, spans) for statement in statements)
        assert any("SELECT" in str(statement.attributes.get("db.statement", statement.attributes.get("db.query.text"))) for statement in statements)
    assert {span.resource["service.name"] for span in spans} == {"goldenset"}
    assert {span.resource["goldenset.role"] for span in spans} == {"api"}
    assert all(span.resource["service.version"] for span in spans)

    failed_sql = [span for span in spans if span.scope == SQL_SCOPE and span.status == STATUS_ERROR]
    assert failed_sql, "the refused INSERT shows as a failed statement"
    carried = [text for span in spans for text in span.texts()]
    for secret in (token, token[-12:], *ITEM_FRAGMENTS):
        assert [text for text in carried if secret in text] == [], secret
    assert not [text for text in carried if "limit=5" in text], "query strings are dropped"

    access = [line for line in _json_lines(replica.output()) if line.get("name") == "goldenset.access" and line.get("route") == "/v1/items"]
    assert access and access[0]["trace_id"] == listed.trace_id and len(access[0]["span_id"]) == 16


def test_the_scheduler_traces_its_curation_run_with_counts_and_logs_its_trace_id(
    database_url: str, engine: Engine, tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(engine, "hadoop", hadoop_reports(4))
    _exporting_to(receiver, monkeypatch)
    env = {"OTEL_ENABLED": "true", "LOG_JSON": "true", "LOG_LEVEL": "INFO", "CURATE_INTERVAL_SECONDS": "1"}
    worker = start_scheduler(database_url, tmp_path / "worker.log", env=env)
    try:
        spans = receiver.wait_for(lambda spans: any(span.name == "goldenset.curation.run" and span.attributes.get("goldenset.decided") for span in spans), seconds=90)
    finally:
        worker.stop()
    run = next(span for span in spans if span.name == "goldenset.curation.run" and span.attributes.get("goldenset.decided"))
    assert run.attributes["goldenset.decided"] == 4 and run.attributes["goldenset.unique"] == 4
    assert run.attributes["goldenset.outcome"] == "ok" and run.resource["goldenset.role"] == "worker"
    by_id = {span.span_id: span for span in spans}
    assert by_id[run.parent_id].name == "goldenset.job.curate"
    assert any(span.scope == SQL_SCOPE and run.span_id in _ancestors(span, spans) for span in spans)
    curated = [line for line in _json_lines(worker.output()) if line.get("message", "").startswith("curated 4 items")]
    assert curated and curated[0]["trace_id"] == run.trace_id


SPAN_HELPER_SCRIPT = """
import io, logging, sys
from service.core.logs import configure_logging
from service.core.settings import Settings
from service.core import tracing

stream = io.StringIO()
configure_logging("INFO", json_format=True, stream=stream)
assert tracing.configure_tracing(Settings(otel_enabled=True), role="worker")

@tracing.traced("goldenset.test.job")
def job(fail):
    tracing.annotate(items=3, skipped=None)
    logging.getLogger("goldenset.test").info("inside the job")
    if fail:
        raise ValueError("could not store 'Quasar-Vb52 payment outage' with token gs_" + "x" * 24)

job(False)
try:
    job(True)
except ValueError:
    pass
with tracing.span("goldenset.test.block", source="ops") as block:
    block.set(new=2)
tracing.shutdown_tracing()
sys.stdout.write(stream.getvalue())
"""


def test_the_span_helpers_record_outcomes_and_counts_never_exception_messages(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    _exporting_to(receiver, monkeypatch)
    result = subprocess.run([sys.executable, "-c", SPAN_HELPER_SCRIPT], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    spans = receiver.wait_for(lambda spans: len(spans) == 3, seconds=10)
    ok, failed = (span for span in spans if span.name == "goldenset.test.job")
    assert ok.attributes == {"goldenset.items": 3, "goldenset.outcome": "ok"}
    assert failed.attributes == {"goldenset.items": 3, "goldenset.outcome": "error", "error.type": "ValueError"} and failed.status == STATUS_ERROR
    block = next(span for span in spans if span.name == "goldenset.test.block")
    assert block.attributes == {"goldenset.source": "ops", "goldenset.new": 2, "goldenset.outcome": "ok"}
    assert ok.resource["goldenset.role"] == "worker" and ok.resource["service.name"] == "goldenset"
    assert not [text for span in spans for text in span.texts() if "Quasar" in text or "gs_" in text]
    logged = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["trace_id"], line["span_id"]) for line in logged] == [(ok.trace_id, ok.span_id), (failed.trace_id, failed.span_id)]


def test_the_sdk_variables_override_the_service_name_and_add_resource_attributes(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    _exporting_to(receiver, monkeypatch)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "goldenset-eu")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
    script = textwrap.dedent("""
        from service.core.settings import Settings
        from service.core import tracing
        tracing.configure_tracing(Settings(otel_enabled=True), role="all")
        with tracing.span("goldenset.test.block"):
            pass
        tracing.shutdown_tracing()
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    (span,) = receiver.wait_for(lambda spans: len(spans) == 1, seconds=10)
    assert span.resource["service.name"] == "goldenset-eu" and span.resource["deployment.environment"] == "staging"
    assert span.resource["goldenset.role"] == "all"


OFF_SCRIPT = """
import sys
from service.app import create_app
from service.core.settings import Settings
from service.core import tracing
import service.cli, service.scheduler

settings = Settings(database_url=sys.argv[1], secret_key="{key}")
assert not tracing.configure_tracing(settings, role="all")
create_app(settings, role="all")
with tracing.span("goldenset.test.block", n=1) as block:
    block.set(m=2)
print(sorted(name for name in sys.modules if name.startswith(("opentelemetry.sdk", "opentelemetry.instrumentation", "opentelemetry.exporter", "opentelemetry.proto"))))
"""


def test_off_by_default_nothing_of_the_sdk_exporter_or_instrumentations_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FastAPI imports the OpenTelemetry API itself (its own telemetry hooks); goldenset adds
    nothing to that while tracing is off."""
    monkeypatch.delenv("GOLDENSET_OTEL_ENABLED", raising=False)
    script = OFF_SCRIPT.replace("{key}", TEST_SECRET_KEY)
    result = subprocess.run([sys.executable, "-c", script, f"sqlite:///{tmp_path / 'off.db'}"], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


MISSING_SCRIPT = """
import sys
sys.modules["opentelemetry.exporter.otlp.proto.http.trace_exporter"] = None
from service.cli import app
app(["serve", "--no-scheduler", "--port", "0"])
"""


def test_tracing_on_without_the_packages_refuses_to_start_naming_the_extra(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GOLDENSET_")}
    env.update(GOLDENSET_OTEL_ENABLED="true", GOLDENSET_DATABASE_URL=f"sqlite:///{tmp_path / 'missing.db'}", COLUMNS="80")
    result = subprocess.run([sys.executable, "-c", MISSING_SCRIPT], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "pip install 'goldenset[otel]'" in result.stderr and "Traceback" not in result.stderr
    assert "opentelemetry.exporter.otlp.proto.http.trace_exporter is missing" in result.stderr
