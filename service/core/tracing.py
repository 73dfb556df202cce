"""OpenTelemetry traces from every role, off unless `GOLDENSET_OTEL_ENABLED=true`.

Off, this module imports nothing of OpenTelemetry, and `span`, `traced` and `annotate` cost a
check of one variable. On (`configure_tracing`), spans go through a BatchSpanProcessor to an OTLP
exporter over HTTP/protobuf, which reads its own variables (`OTEL_EXPORTER_OTLP_ENDPOINT`,
default `http://localhost:4318`, and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, default that endpoint
plus `/v1/traces`); the resource is `service.name=goldenset`, `service.version` and
`goldenset.role`, which `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` override, and the
sampler is the SDK's (`OTEL_TRACES_SAMPLER`). FastAPI requests (not `/healthz` nor `/metrics`),
SQL statements (their text, never their parameters) and outgoing httpx requests are traced, and
log records carry the `trace_id` and `span_id` of the span they were written in.

What leaves the process never holds item text, tokens, secrets or bodies: before export, query
strings and captured headers are dropped, an exception is reduced to its type (its message may
quote a stored value), a status keeps no description, and token-shaped strings are masked."""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from service.core.logs import mask_secrets
from service.core.settings import Role, Settings

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import Tracer
    from sqlalchemy.engine import Engine

SERVICE_NAME = "goldenset"
INSTALL_HINT = "pip install 'goldenset[otel]'"
EXCLUDED_URLS = "/healthz$,/metrics$"
"""Routes never traced: probes and scrapes, many a minute, would drown the requests that matter."""
ATTRIBUTE_PREFIX = "goldenset."
AttributeValue = str | bool | int | float

# Attributes that may carry what a client or a connector put in a URL or a header.
_DROPPED_ATTRIBUTES = frozenset({"url.query"})
_DROPPED_PREFIXES = ("http.request.header.", "http.response.header.", "db.query.parameter.")
_URL_ATTRIBUTES = frozenset({"http.url", "url.full", "http.target"})
# An exception event keeps its type only: the message and the stack trace's last line may quote a value.
_EXCEPTION_KEPT = frozenset({"exception.type", "exception.escaped"})
# Headers the FastAPI instrumentation redacts should an operator ask it to capture headers.
_SANITIZED_HEADERS = [".*authorization.*", ".*cookie.*", ".*token.*", ".*secret.*", ".*signature.*", ".*key.*"]

P = ParamSpec("P")
R = TypeVar("R")


class TracingUnavailable(RuntimeError):
    """Tracing was asked for, but the OpenTelemetry packages are not installed."""


@dataclass
class _Tracing:
    provider: TracerProvider
    tracer: Tracer
    engines: set[int]


_state: _Tracing | None = None
_configure_lock = threading.Lock()


def enabled() -> bool:
    """Whether `configure_tracing` turned tracing on in this process."""
    return _state is not None


def configure_tracing(settings: Settings, *, role: Role) -> bool:
    """Turn tracing on for this process when `settings.otel_enabled`; True when it is on.

    Sets the global tracer provider, instruments httpx, adds `trace_id`/`span_id` to the records
    of the root logger's handlers (call after `configure_logging`), and flushes the batch when
    the process ends, by SIGTERM too. Calling it again changes nothing. Raises
    `TracingUnavailable` naming the extra to install when the packages are missing."""
    global _state
    if not settings.otel_enabled:
        return False
    with _configure_lock:
        if _state is not None:
            return True
        try:
            from opentelemetry import trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
            from opentelemetry.sdk.resources import OTELResourceDetector, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise TracingUnavailable(f"GOLDENSET_OTEL_ENABLED=true needs the OpenTelemetry packages ({exc.name} is missing): {INSTALL_HINT}") from None
        defaults: dict[str, AttributeValue] = {"service.name": SERVICE_NAME, "service.version": _version(), "goldenset.role": role}
        # The SDK's own variables win over goldenset's defaults, as they would over any other service's.
        resource = Resource.create({**defaults, **OTELResourceDetector().detect().attributes})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(cast("SpanExporter", _RedactingExporter(OTLPSpanExporter()))))
        trace.set_tracer_provider(provider)
        HTTPXClientInstrumentor().instrument(tracer_provider=provider)
        for handler in logging.getLogger().handlers:
            handler.addFilter(_SpanIds())
        _state = _Tracing(provider=provider, tracer=provider.get_tracer("goldenset", _version()), engines=set())
    _flush_before_sigterm()
    return True


def shutdown_tracing() -> None:
    """Export what is still batched and stop tracing; nothing when it is off."""
    global _state
    state, _state = _state, None
    if state is not None:
        state.provider.shutdown()


def instrument_app(app: FastAPI) -> None:
    """Trace `app`'s requests (one server span each, named by route, with its status), except
    `EXCLUDED_URLS`; nothing when tracing is off."""
    state = _state
    if state is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=state.provider, excluded_urls=EXCLUDED_URLS, exclude_spans=["receive", "send"], http_capture_headers_sanitize_fields=_SANITIZED_HEADERS
    )


def instrument_engine(engine: Engine) -> None:
    """Trace `engine`'s statements (their text, never their parameters) as children of the
    current span; once per engine, nothing when tracing is off."""
    state = _state
    if state is None or id(engine) in state.engines:
        return
    from opentelemetry import metrics, trace
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
    from opentelemetry.instrumentation.sqlalchemy.version import __version__

    tracer = trace.get_tracer("opentelemetry.instrumentation.sqlalchemy", __version__, state.provider)
    # The connection-pool gauge goes to a meter that records nothing: goldenset exports no OpenTelemetry metrics.
    connections = metrics.NoOpMeter("goldenset").create_up_down_counter("db.client.connections.usage")
    EngineTracer(tracer, engine, connections, enable_commenter=False)  # type: ignore[no-untyped-call]
    state.engines.add(id(engine))


class Traced:
    """The span of a `span` block; `set` adds attributes to it (nothing when tracing is off)."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, **attributes: AttributeValue | None) -> None:
        """Set each keyword as attribute `goldenset.<keyword>`; None values are left out."""
        if self._span is not None:
            self._span.set_attributes(_prefixed(attributes))


_OFF = Traced(None)


@contextmanager
def span(name: str, **attributes: AttributeValue | None) -> Iterator[Traced]:
    """A span named `name` around the block, a child of the current span, with each keyword as
    attribute `goldenset.<keyword>` (None values left out). It ends with `goldenset.outcome`:
    `ok`, or `error` with `error.type` (the exception's class, never its message) and an error
    status, and the exception propagates. Off: nothing is recorded.

    Callers pass counts, names and ids only: never item text, tokens, secrets or bodies."""
    state = _state
    if state is None:
        yield _OFF
        return
    from opentelemetry.trace import StatusCode

    with state.tracer.start_as_current_span(name, attributes=_prefixed(attributes), record_exception=False, set_status_on_exception=False) as current:
        try:
            yield Traced(current)
        except BaseException as exc:
            current.set_attributes({f"{ATTRIBUTE_PREFIX}outcome": "error", "error.type": _type_name(exc)})
            current.set_status(StatusCode.ERROR)
            raise
        current.set_attribute(f"{ATTRIBUTE_PREFIX}outcome", "ok")


def traced(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function so that each call runs inside `span(name)`; `annotate` adds to it."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if _state is None:
                return function(*args, **kwargs)
            with span(name):
                return function(*args, **kwargs)

        return wrapper

    return decorate


def annotate(**attributes: AttributeValue | None) -> None:
    """Set attributes `goldenset.<keyword>` on the current span (None values left out); nothing
    when tracing is off."""
    if _state is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(_prefixed(attributes))


def _prefixed(attributes: dict[str, AttributeValue | None]) -> dict[str, AttributeValue]:
    return {f"{ATTRIBUTE_PREFIX}{key}": value for key, value in attributes.items() if value is not None}


def _type_name(error: BaseException) -> str:
    kind = type(error)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _version() -> str:
    try:
        return importlib.metadata.version("goldenset")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class _SpanIds(logging.Filter):
    """Adds `trace_id` (32 hex digits) and `span_id` (16) to a record written inside a span."""

    def filter(self, record: logging.LogRecord) -> bool:
        from opentelemetry import trace

        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return True


def _flush_before_sigterm() -> None:
    """On SIGTERM, export the batch, then let the signal do what it did before (uvicorn re-raises
    it after its graceful shutdown; a scheduler dies of it), which would skip the exit hooks."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM) or signal.SIG_DFL

    def flush_then_continue(signum: int, frame: FrameType | None) -> None:
        shutdown_tracing()
        signal.signal(signal.SIGTERM, previous)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.raise_signal(signum)

    signal.signal(signal.SIGTERM, flush_then_continue)


class _RedactingExporter:
    """A span exporter that hands `inner` copies of the spans without what must never leave the
    process (see the module's docstring)."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export([_redacted(one) for one in spans])

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


def _redacted(original: ReadableSpan) -> ReadableSpan:
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Status

    events = [
        Event(
            event.name,
            {key: value for key, value in (event.attributes or {}).items() if key in _EXCEPTION_KEPT} if event.name == "exception" else _safe_attributes(event.attributes),
            event.timestamp,
        )
        for event in original.events
    ]
    return ReadableSpan(
        name=mask_secrets(original.name),
        context=original.context,
        parent=original.parent,
        resource=original.resource,
        attributes=_safe_attributes(original.attributes),
        events=events,
        links=original.links,
        kind=original.kind,
        status=Status(original.status.status_code),
        start_time=original.start_time,
        end_time=original.end_time,
        instrumentation_scope=original.instrumentation_scope,
    )


def _safe_attributes(attributes: Any) -> dict[str, Any]:
    safe: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if key in _DROPPED_ATTRIBUTES or key.startswith(_DROPPED_PREFIXES):
            continue
        if isinstance(value, str):
            safe[key] = mask_secrets(value.split("?", 1)[0].split("#", 1)[0] if key in _URL_ATTRIBUTES else value)
        elif isinstance(value, Sequence) and not isinstance(value, bytes):
            safe[key] = [mask_secrets(item) if isinstance(item, str) else item for item in value]
        else:
            safe[key] = value
    return safe
