"""A vendor replay: a real HTTP server on 127.0.0.1 answering from a Python handler, with faults
injected by request number (a status with headers, a delay past the client's timeout, a
connection reset). Vendor modules beside this one build the documented response shapes."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class Reply:
    status: int = 200
    json: Any = None
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Delay:
    """Answer normally, but only after `seconds` (longer than the client's timeout: a timeout)."""

    seconds: float


@dataclass(frozen=True)
class Reset:
    """Close the connection with a TCP reset instead of answering."""


Fault = Reply | Delay | Reset
Handler = Callable[[Request], Reply]


class ReplayServer:
    """Serves `handler` on a free loopback port. `faults[n]` replaces or delays the n-th request
    (1-based, counted over all requests); `aim(is_page, faults)` does the same for the n-th request
    that `is_page` picks out (a retried request counts again); `requests` logs what arrived."""

    def __init__(self, handler: Handler, faults: dict[int, Fault] | None = None) -> None:
        self.handler = handler
        self.faults: dict[int, Fault] = dict(faults or {})
        self.requests: list[Request] = []
        self.picked: Callable[[Request], bool] = lambda request: False
        self.picked_faults: dict[int, Fault] = {}
        self.picked_count = 0
        self._lock = threading.Lock()
        replay = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate sends; with Nagle on, the body waits for the
            # client's delayed ACK (about 40 ms a request on Linux).
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    method=self.command,
                    path=parts.path,
                    query=parse_qs(parts.query, keep_blank_values=True),
                    headers={key.lower(): value for key, value in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                )
                with replay._lock:
                    replay.requests.append(request)
                    fault = replay.faults.pop(len(replay.requests), None)
                    if replay.picked(request):
                        replay.picked_count += 1
                        fault = replay.picked_faults.pop(replay.picked_count, fault)
                if isinstance(fault, Reset):
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                if isinstance(fault, Delay):
                    time.sleep(fault.seconds)
                reply = fault if isinstance(fault, Reply) else replay.handler(request)
                payload = reply.body if reply.body is not None else json.dumps(reply.json).encode()
                try:
                    self.send_response(reply.status)
                    headers = {"Content-Type": "application/json", **reply.headers}
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_GET = _serve
            do_POST = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> ReplayServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def aim(self, is_page: Callable[[Request], bool], faults: dict[int, Fault]) -> None:
        """From now on, `faults[n]` hits the n-th request (counted from now) that `is_page` picks."""
        with self._lock:
            self.picked, self.picked_faults, self.picked_count = is_page, dict(faults), 0

    def count(self, path: str) -> int:
        return sum(1 for request in self.requests if request.path == path)


@contextmanager
def serve(handler: Handler, faults: dict[int, Fault] | None = None) -> Iterator[ReplayServer]:
    server = ReplayServer(handler, faults).start()
    try:
        yield server
    finally:
        server.stop()
