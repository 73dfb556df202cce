"""How many requests a process works on at once: the rest wait their turn.

`ConcurrentRequests` is ASGI middleware holding a slot for each HTTP request from the moment it
arrives until its answer (body and background work included) is sent. A request that finds every
slot taken waits, in arrival order, for one: it is neither refused nor timed out here (the client's
own timeout is the only limit). A request holds at most one pooled database connection at a time
(`tests/core/e2e/test_one_connection_per_request.py`), so with `GOLDENSET_CONCURRENT_REQUESTS` at or
below the pool's connections requests never wait for a connection, and at or below
`GOLDENSET_DB_POOL_SIZE` the pool never opens an overflow connection for them: under any number of
clients its connections stay open and reused, instead of dozens opened and closed each second
while more requests than connections contend for one interpreter. Lifespan and other non-HTTP
events pass straight through.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send


class ConcurrentRequests:
    """Admit at most `limit` HTTP requests at once into `app`; later ones wait in order."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"at least one request must be admitted at a time, not {limit}")
        self.app = app
        self.limit = limit
        self._slots: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._slots is None:  # made on the server's event loop, on the first request
            self._slots = asyncio.Semaphore(self.limit)
        async with self._slots:
            await self.app(scope, receive, send)
