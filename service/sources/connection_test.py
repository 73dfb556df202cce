"""Testing a connector source's connection: one page read from its vendor with the stored settings
and credentials, nothing stored, and an answer a person can act on.

Contract:

- `run_connection_test(engine=..., name=..., secret_key=..., actor=...)` refuses an unknown source
  (`ConnectionTestRefused`, 404) and a source without a connector (409) before sending anything.
  Otherwise it reads the first page the next pull would read (from the stored cursor, else from
  the beginning) through the connector's own `pages()`, so auth, URLs, redirects and the mapping
  of vendor answers to errors are exactly a pull's, and writes one audit event, `source.test`,
  with the actor and the outcome. Nothing else is written: no item, no cursor, no pull state (the
  source's `status`, `last_error` and run times stay as they were), and records are not mapped.
- Bounded: the whole test has `timeout` seconds (`TEST_TIMEOUT_SECONDS`); each request's timeouts
  are clamped to what is left of it, the answer's body too. Each request is sent once (no retry)
  and nothing is waited for: a vendor asking to wait (429, a rate limit, a `Retry-After`) is
  reported with the wait it asked for (`retry_after_seconds`).
- The answer, `schemas.source.ConnectionTestResult`: `ok` with the HTTP status, the records on
  that page, the requests sent and the time taken; or the outcome that stopped the test
  (`schemas.source.ConnectionOutcome`), the connector's own message (`detail`) and what to
  change (`action`), naming the settings concerned and the command that changes them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.refusals import Refused
from ingest.connectors.base import AuthError, ConfigError, ConnectorConfig, ConnectorContext, ConnectorError, MalformedPage, RetryPolicy, TransientError
from ingest.connectors.registry import UnknownConnector, connector_class
from ingest.http import Retryable
from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.source import ConnectionOutcome, ConnectionTestResult, Source
from service.core.db import write_transaction
from service.sources.definitions import PLAIN_KINDS, connector_config, get_source
from service.sources.pulls import HTTP_TIMEOUT

logger = logging.getLogger("goldenset.sources.test")
TEST_TIMEOUT_SECONDS = 10.0
"""The time one connection test may take, every request and answer together."""
CONNECT_TIMEOUT_SECONDS = 5.0
NO_RETRY = RetryPolicy(max_attempts=1, max_wait_seconds=0.0)
"""One attempt per request, and no wait for a vendor that asks for one: it is reported instead."""
DETAIL_LIMIT = 1000
EXCERPT_LIMIT = 300
ACCOUNT_SETTINGS = ("email", "username")
"""Settings that name the account a secret belongs to: refused credentials may be either."""


class ConnectionTestRefused(Refused):
    """The test cannot run: `not_found` (404) for an unknown source, `not_a_connector` (409) for a
    source records are pushed to or ingested into (nothing to connect to)."""


@dataclass
class _Exchange:
    """What went over the wire: requests sent, the last address asked (without its query) and the
    vendor's last answer."""

    requests: int = 0
    url: str | None = None
    host: str | None = None
    answer: httpx.Response | None = None

    @property
    def status(self) -> int | None:
        return self.answer.status_code if self.answer is not None else None

    def excerpt(self) -> str:
        """The start of the last answer's body, on one line ("" when there is none or it was not read)."""
        if self.answer is None or not self.answer.is_closed:
            return ""
        text = " ".join(self.answer.text.split())
        return text[:EXCERPT_LIMIT] + ("…" if len(text) > EXCERPT_LIMIT else "")


class _UntilDeadline(httpx.SyncByteStream):
    """An answer's body, read no later than the test's deadline."""

    def __init__(self, inner: httpx.SyncByteStream, deadline: float, request: httpx.Request) -> None:
        self._inner, self._deadline, self._request = inner, deadline, request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            if time.monotonic() > self._deadline:
                raise httpx.ReadTimeout("the connection test's time ran out while reading the answer", request=self._request)
            yield chunk

    def close(self) -> None:
        self._inner.close()


def _bounded_client(deadline: float, timeout: float, exchange: _Exchange) -> httpx.Client:
    """A client as a pull's (redirects followed, the environment's proxies), whose every request
    and answer ends by `deadline` (`time.monotonic()`), recording what it sends in `exchange`."""

    def before(request: httpx.Request) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise httpx.ConnectTimeout("the connection test's time ran out before this request", request=request)
        clamped: dict[str, Any] = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {key: min(clamped.get(key) or left, left) for key in ("connect", "read", "write", "pool")}
        exchange.requests += 1
        exchange.host = request.url.netloc.decode("ascii", "replace")  # without any user:password@
        exchange.url = f"{request.url.scheme}://{exchange.host}{request.url.path}"

    def after(response: httpx.Response) -> None:
        exchange.answer = response
        if isinstance(response.stream, httpx.SyncByteStream):
            response.stream = _UntilDeadline(response.stream, deadline, response.request)

    timeouts = httpx.Timeout(min(timeout, HTTP_TIMEOUT.read or timeout), connect=min(timeout, CONNECT_TIMEOUT_SECONDS))
    return httpx.Client(timeout=timeouts, follow_redirects=True, headers={"User-Agent": "goldenset"}, event_hooks={"request": [before], "response": [after]})


def run_connection_test(
    *,
    engine: Engine,
    name: str,
    secret_key: str,
    actor: str,
    timeout: float = TEST_TIMEOUT_SECONDS,
    clock: Callable[[], datetime] = utcnow,
) -> ConnectionTestResult:
    """Test the connection of the connector source `name` (see the module): the result, audited as
    `source.test`; `ConnectionTestRefused` before anything is sent or written."""
    with Session(engine) as session:
        source = get_source(session=session, name=name)
        if source is None:
            raise ConnectionTestRefused(
                "not_found", f"source {name!r} does not exist; create it with POST /v1/sources (admin scope) or `goldenset source create {name} --kind KIND`", 404
            )
        if source.kind in PLAIN_KINDS:
            raise ConnectionTestRefused(
                "not_a_connector",
                f"source {name!r} is a {source.kind} source: records are pushed to it or ingested from files, so there is no connection to test; "
                "only connector sources (jira, github, pagerduty, ...) are tested",
                409,
            )
        session.expunge(source)
    result = _read_first_page(source, secret_key=secret_key, timeout=timeout, clock=clock)
    with write_transaction(engine) as session:
        details = result.model_dump(mode="json", include={"outcome", "http_status", "records", "from_cursor", "requests", "elapsed_seconds", "retry_after_seconds"})
        session.add(AuditEvent(actor=actor, action=AuditAction.SOURCE_TEST, object_type="source", object_id=name, details=details))
    logger.info("connection test of %s: %s (HTTP %s, %s records, %.2f s)", name, result.outcome.value, result.http_status, result.records, result.elapsed_seconds)
    return result


def _read_first_page(source: Source, *, secret_key: str, timeout: float, clock: Callable[[], datetime]) -> ConnectionTestResult:
    """The first page of `source` read as the module says, as a result (never raises a connector's error)."""
    result = _Result(source=source.name, kind=source.kind, from_cursor=bool(source.cursor))
    try:
        config = connector_config(source, secret_key=secret_key)
        connector_type = connector_class(source.kind)
    except (ConfigError, UnknownConnector, ValueError) as exc:
        return result.failed(ConnectionOutcome.BAD_SETTINGS, str(exc), _fix_settings(source.name), exchange=_Exchange(), elapsed=0.0)
    exchange = _Exchange()
    started = time.monotonic()
    with _bounded_client(started + timeout, timeout, exchange) as client:
        connector = connector_type(config, ConnectorContext(client=client, clock=clock, sleep=_never_wait, retry=NO_RETRY))
        pages = connector.pages(source.cursor)
        try:
            page = next(pages, None)
        except ConnectorError as exc:
            outcome, detail, action, wait = _explain(exc, exchange, config, source.name, timeout)
            return result.failed(outcome, detail, action, exchange=exchange, elapsed=time.monotonic() - started, wait=wait)
        finally:
            if isinstance(pages, Generator):
                pages.close()  # the rest of the pull is never read
    elapsed = time.monotonic() - started
    records = len(page.records) if page is not None else 0
    if exchange.requests == 0:
        detail = f"the {source.kind} connector had nothing to ask for (its settings select nothing yet), so the credentials were not checked"
        return result.succeeded(records, detail, exchange=exchange, elapsed=elapsed)
    where = "from the stored cursor (where the next pull starts)" if result.from_cursor else "from the beginning"
    counted = f"{records} record{'s' if records != 1 else ''}"
    sent = f"{exchange.requests} request{'s' if exchange.requests != 1 else ''}"
    detail = f"{source.kind} answered HTTP {exchange.status}: the first page {where} had {counted} ({sent}, {elapsed:.2f} s)"
    return result.succeeded(records, detail, exchange=exchange, elapsed=elapsed)


def _never_wait(_seconds: float) -> None:
    """A connection test waits for nothing (`NO_RETRY` asks for no wait: a vendor's is reported)."""


@dataclass(frozen=True)
class _Result:
    source: str
    kind: str
    from_cursor: bool

    def succeeded(self, records: int, detail: str, *, exchange: _Exchange, elapsed: float) -> ConnectionTestResult:
        return self._make(ConnectionOutcome.OK, detail, None, exchange=exchange, elapsed=elapsed, records=records, wait=None)

    def failed(self, outcome: ConnectionOutcome, detail: str, action: str, *, exchange: _Exchange, elapsed: float, wait: float | None = None) -> ConnectionTestResult:
        return self._make(outcome, detail.replace("{name}", self.source), action, exchange=exchange, elapsed=elapsed, records=None, wait=wait)

    def _make(
        self, outcome: ConnectionOutcome, detail: str, action: str | None, *, exchange: _Exchange, elapsed: float, records: int | None, wait: float | None
    ) -> ConnectionTestResult:
        return ConnectionTestResult(
            source=self.source,
            kind=self.kind,
            ok=outcome == ConnectionOutcome.OK,
            outcome=outcome,
            http_status=exchange.status,
            records=records,
            from_cursor=self.from_cursor,
            requests=exchange.requests,
            elapsed_seconds=round(elapsed, 3),
            retry_after_seconds=wait,
            detail=detail[:DETAIL_LIMIT],
            action=action,
        )


def _explain(exc: ConnectorError, exchange: _Exchange, config: ConnectorConfig, name: str, timeout: float) -> tuple[ConnectionOutcome, str, str, float | None]:
    """What stopped the test: its outcome, what happened (the connector's words) and what to do
    (naming the settings concerned), and the wait the vendor asked for."""
    urls, address = _address_settings(config, urls_only=True), _address_settings(config)
    if isinstance(exc, AuthError):
        return ConnectionOutcome.BAD_CREDENTIALS, str(exc), _fix_credentials(config, name, refused=exchange.status == 403), None
    if isinstance(exc, TransientError):
        return _explain_transient(exc, exchange, urls, name, timeout)
    change = _configure(name, address)
    if isinstance(exc, MalformedPage):
        if exchange.requests == 0:
            return ConnectionOutcome.BAD_SETTINGS, str(exc), _fix_settings(name), None
        action = f"The answer from {exchange.url} is not the vendor's API: check that {urls} name the API root ({_configure(name, urls)})."
        return ConnectionOutcome.UNEXPECTED_ANSWER, str(exc), action, None
    if exchange.status in (404, 410):
        return ConnectionOutcome.NOT_FOUND, str(exc), f"{exchange.url} does not exist (HTTP {exchange.status}): check {address}, which build that address ({change}).", None
    if exchange.status is not None and 400 <= exchange.status < 500:
        return (
            ConnectionOutcome.REFUSED,
            str(exc),
            f"The vendor refused the request (HTTP {exchange.status}); its answer above says why: correct the setting it names ({change}).",
            None,
        )
    return ConnectionOutcome.UNEXPECTED_ANSWER, str(exc), f"Check {address} and the other settings of source {name} ({change}).", None


def _explain_transient(exc: TransientError, exchange: _Exchange, address: str, name: str, timeout: float) -> tuple[ConnectionOutcome, str, str, float | None]:
    """A request that got no usable answer: a connection that failed or timed out, a vendor asking
    to wait, or a 5xx. `address`: the settings that name the vendor's host."""
    said = _vendor_words(exc)
    failure = _transport_failure(exc)
    host = exchange.host or "the vendor's host"
    if isinstance(failure, httpx.TimeoutException):
        return (
            ConnectionOutcome.TIMED_OUT,
            f"{said} within the test's {timeout:.0f} s",
            f"{host} did not answer in time: check {address} and that this server can reach {host}, then test again (a pull waits longer and retries).",
            None,
        )
    if failure is not None:
        return (
            ConnectionOutcome.UNREACHABLE,
            said,
            f"The host {host} cannot be reached: check {address} ({_configure(name, address)}), and that this server can reach it (DNS, firewall, proxy).",
            None,
        )
    wait = exc.wait_seconds
    after = f"in {wait:.0f} s, as it asks" if wait else "later"
    if excerpt := exchange.excerpt():
        said = f"{said}: {excerpt}"
    if exchange.status is not None and exchange.status >= 500:
        return ConnectionOutcome.VENDOR_ERROR, said, f"The vendor failed to answer (HTTP {exchange.status}): test again {after}; a pull retries this by itself.", wait
    return (
        ConnectionOutcome.RATE_LIMITED,
        said,
        f"The vendor's rate limit is spent (HTTP {exchange.status}): test again {after}; a pull waits for it by itself. A test does not wait.",
        wait,
    )


def _vendor_words(exc: TransientError) -> str:
    """The vendor's answer as the connector's HTTP layer told it (`ingest.http.Retryable`), without the pull's advice."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, Retryable):
            return str(cause)
        cause = cause.__cause__
    return str(exc)


def _transport_failure(exc: BaseException) -> httpx.TransportError | None:
    """The connection's own failure behind `exc` (no answer at all), if any."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, httpx.TransportError):
            return cause
        cause = cause.__cause__
    return None


def _names(names: list[str]) -> str:
    quoted = [f"`{name}`" for name in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _address_settings(config: ConnectorConfig, *, urls_only: bool = False) -> str:
    """The settings that say where the vendor is (the URLs, a region) and, unless `urls_only`, what
    to read there: the other required settings that are not credentials (a repository's owner, an
    organization)."""
    fields = type(config).model_fields
    urls = [field for field in fields if "url" in field or field == "region"]
    required = [] if urls_only else [field for field, info in fields.items() if info.is_required() and field not in urls and not isinstance(getattr(config, field), SecretStr)]
    return _names(urls + required) if urls or required else "the settings"


def _configure(name: str, address: str) -> str:
    first = address.split("`")[1] if "`" in address else "KEY"
    return f"`goldenset source configure {name} --set {first}=...`, PATCH /v1/sources/{name} connector_settings, or the source's settings page"


def _fix_credentials(config: ConnectorConfig, name: str, *, refused: bool) -> str:
    """What to do about refused credentials: the secret settings stored (those to replace), and how."""
    secrets = [field for field in type(config).model_fields if isinstance(getattr(config, field), SecretStr)]
    accounts = [field for field in ACCOUNT_SETTINGS if getattr(config, field, None)]
    stored = _names(accounts + secrets) if secrets else "the credentials"
    command = f"`goldenset source configure {name} --set {secrets[0] if secrets else 'KEY'}=-`"
    how = f"{command} (it asks for the value), PATCH /v1/sources/{name} connector_settings, or the source's settings page"
    if refused:
        return f"The vendor knows the credentials in {stored} but refuses them access (403): give their account read access to what the source reads, or replace them: {how}."
    return f"The vendor rejected the credentials in {stored} (401: wrong, expired or revoked): replace them with {how}."


def _fix_settings(name: str) -> str:
    return (
        f"Correct the source's settings as the message says: `goldenset source configure {name} --set KEY=VALUE` "
        f"(a stored cursor: `--reset-cursor`), PATCH /v1/sources/{name}, or the source's settings page."
    )
