"""Requests whose database connection is lost mid-way (PostgreSQL restarted or failed over, a
backend terminated, a proxy that dropped the connection).

The engine checks each pooled connection before handing it out (`pool_pre_ping`), so a connection
that died while idle is replaced unseen. One that dies while a request holds it makes that
request's next statement fail. `DisconnectRecovery` turns that failure into something a client
can act on instead of a 500:

- a GET or HEAD is answered once more, from the start, on a fresh connection (reads write
  nothing, so running one twice is harmless); the client sees only the second answer;
- any other request (and a GET whose second try fails the same way) is answered 503
  `application/problem+json` with `Retry-After`. Each write is one transaction, so it was either
  committed whole or not at all (the connection may die during COMMIT, after the server
  committed); sending the request again is how a client finds out. Pushes of records
  (`POST /v1/sources/{name}/items`) are idempotent, so a batch sent twice stores nothing twice.

A request that finds no free pooled connection within GOLDENSET_DB_POOL_TIMEOUT (the process's
connections all in use) is answered 503 with `Retry-After` too, wherever it waited: in its route
(`service.core.problems`) or before, while its token was looked up.

A failure after the answer started (a streamed body) cannot be changed and ends the response."""

from __future__ import annotations

import logging

import psycopg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.core.problems import pool_saturated, problem_response

logger = logging.getLogger("goldenset.database")
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD"})
RETRY_AFTER_SECONDS = 1
# SQLSTATE classes of a connection that is gone: 08 (connection exception) and 57P (the server
# shut the session down: terminated by an admin, crash or restart).
LOST_CONNECTION_STATES = ("08", "57P")


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from or while handling, says the database
    connection was lost or could not be made (PostgreSQL); False for every other error, SQLite's
    included."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, DBAPIError) and (current.connection_invalidated or _lost(current.orig)):
            return True
        if _lost(current):
            return True
        pending.extend(cause for cause in (current.__cause__, current.__context__) if cause is not None)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return False


def _lost(error: BaseException | None) -> bool:
    if not isinstance(error, psycopg.OperationalError):
        return False
    state = error.sqlstate
    return state is None or state.startswith(LOST_CONNECTION_STATES)


class DisconnectRecovery:
    """ASGI middleware: a GET or HEAD that failed because its database connection was lost runs
    once more; any other request that failed so, or found no free connection, is answered 503 with
    `Retry-After` (see the module docstring). Every other error passes through unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        received: list[Message] = []

        async def recording(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        async def remembering() -> Message:
            message = await receive()
            received.append(message)
            return message

        idempotent = scope["method"] in IDEMPOTENT_METHODS
        attempts = 2 if idempotent else 1
        for attempt in range(1, attempts + 1):
            try:
                await self.app(scope, remembering if attempt == 1 else _replay(received, receive), recording)
                return
            except PoolTimeout:
                if started:
                    raise
                await pool_saturated(scope["method"], scope["path"])(scope, receive, send)
                return
            except Exception as exc:
                if started or not connection_lost(exc):
                    raise
                logger.warning(
                    "%s %s: the database connection was lost (%s)%s",
                    scope["method"],
                    scope["path"],
                    type(exc).__name__,
                    "; answering it again on a new connection" if attempt < attempts else "; answering 503",
                )
        detail = "the database connection was lost during this request; send it again in a moment (a write was committed whole or not at all)"
        response = problem_response(503, "Service Unavailable", detail, instance=scope["path"], headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        await response(scope, receive, send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands out `messages` again, then reads on from `receive`."""
    queue = list(messages)

    async def replayed() -> Message:
        return queue.pop(0) if queue else await receive()

    return replayed
