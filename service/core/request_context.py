"""What every HTTP answer gets, whatever answers it: a request id, the security headers of its
kind of path, one access log line and one observation of the request-duration histogram.

A plain ASGI middleware (no extra task or stream per request, which is most of what serving a
cached answer costs): it edits the headers of `http.response.start` as it passes, and logs once
the last body message was sent (or the app failed), so a streamed answer's duration covers its
whole body.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.core.logs import request_id_var

access_log = logging.getLogger("goldenset.access")
REQUEST_ID_HEADER = "X-Request-ID"


class RequestContext:
    """Wrap `app`: take the client's `X-Request-ID` when it is printable and at most 64 characters
    (else make one), echo it on the answer, put `headers_for(path)` on the answer (replacing any
    header of the same name), then log and time the request under its route template."""

    def __init__(self, app: ASGIApp, *, headers_for: Callable[[str], dict[str, str]]) -> None:
        self.app = app
        self.headers_for = headers_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = Headers(scope=scope).get(REQUEST_ID_HEADER, "")
        request_id = incoming if 0 < len(incoming) <= 64 and incoming.isprintable() else uuid.uuid4().hex
        extra = {REQUEST_ID_HEADER: request_id, **self.headers_for(scope["path"])}
        replaced = {name.lower().encode("latin-1") for name in extra}
        added = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in extra.items()]
        status = 500

        async def send_with_context(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [(name, value) for name, value in message.get("headers", []) if name.lower() not in replaced] + added
            await send(message)

        token = request_id_var.set(request_id)
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_context)
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            method = scope["method"]
            scope["app"].state.metrics.request_duration.labels(method, template, str(status)).observe(elapsed)
            access_log.info("%s %s %s", method, template, status, extra={"method": method, "route": template, "status": status, "duration_ms": round(elapsed * 1000, 2)})
            request_id_var.reset(token)
