"""A real OpenAI-compatible embeddings server on loopback: a FastAPI app under uvicorn in a thread,
embedding with the same local model goldenset runs in-process, and answering `POST
/v1/embeddings` in the published shape (`tests/support/embeddings_api/README.md`).

Faults are queued: each request takes the next one (`faults`), and a fault turns the correct
answer into what a broken or busy server sends (a status with headers, an answer missing `data`,
a short list, a wrong dimension, non-finite values, a repeated `index`). With `shuffle` on, every
answer lists its embeddings in a random order, each keeping its `index`.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from curation.dedup.embeddings import Encoder
from tests.conftest import on_loopback

Fault = Callable[[dict[str, Any]], Response]
"""Turns the correct answer (a createEmbedding response body) into the response to send."""


def status(code: int, headers: dict[str, str] | None = None) -> Fault:
    """Answer `code` with an error body in OpenAI's shape, and `headers`."""
    return lambda answer: JSONResponse({"error": {"message": f"injected {code}", "type": "server_error", "param": None, "code": None}}, status_code=code, headers=headers)


def changed(change: Callable[[dict[str, Any]], Any]) -> Fault:
    """Answer 200 with `change(answer)` as the body (JSON that may hold NaN or infinity)."""
    return lambda answer: Response(json.dumps(change(answer)), media_type="application/json")


def without_data(answer: dict[str, Any]) -> Any:
    return {key: value for key, value in answer.items() if key != "data"}


def one_short(answer: dict[str, Any]) -> Any:
    return {**answer, "data": answer["data"][:-1]}


def wrong_dimension(answer: dict[str, Any]) -> Any:
    return {**answer, "data": [{**entry, "embedding": entry["embedding"][:-1]} for entry in answer["data"]]}


def not_finite(answer: dict[str, Any]) -> Any:
    data = [dict(entry) for entry in answer["data"]]
    data[0]["embedding"] = [float("nan"), *data[0]["embedding"][1:]]
    return {**answer, "data": data}


def repeated_index(answer: dict[str, Any]) -> Any:
    data = [dict(entry) for entry in answer["data"]]
    data[-1]["index"] = data[0]["index"]
    return {**answer, "data": data}


@dataclass
class Received:
    """A request as the server saw it."""

    at: float
    body: dict[str, Any]
    authorization: str | None
    status: int = 200


@dataclass
class EmbeddingServer:
    """The running server: `base_url` ends in `/v1`. `received` logs every request, in arrival order."""

    encoder: Encoder
    model_name: str
    api_key: str | None = None
    shuffle: bool = False
    delay: float = 0.0
    base_url: str = ""
    faults: deque[Fault | None] = field(default_factory=deque)
    received: list[Received] = field(default_factory=list)
    most_in_flight: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _random: random.Random = field(default_factory=lambda: random.Random(7))

    @property
    def texts(self) -> list[str]:
        """Every text embedded in a 200 answer, in arrival order."""
        return [text for request in self.received if request.status == 200 for text in request.body["input"]]

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = self.encoder.encode(texts)
        data = [{"object": "embedding", "embedding": [float(value) for value in vector], "index": index} for index, vector in enumerate(vectors)]
        if self.shuffle:
            with self._lock:
                self._random.shuffle(data)
        tokens = sum(len(text.split()) for text in texts)
        return {"object": "list", "data": data, "model": self.model_name, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/embeddings")
        def embeddings(body: dict[str, Any], request: Request) -> Response:
            received = Received(at=time.monotonic(), body=body, authorization=request.headers.get("authorization"))
            with self._lock:
                self.received.append(received)
                fault = self.faults.popleft() if self.faults else None
                self._in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self._in_flight)
            try:
                time.sleep(self.delay)
                return self._respond(body, received, fault)
            finally:
                with self._lock:
                    self._in_flight -= 1

        return app

    def _respond(self, body: dict[str, Any], received: Received, fault: Fault | None) -> Response:
        if self.api_key is not None and received.authorization != f"Bearer {self.api_key}":
            received.status = 401
            return JSONResponse({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}, status_code=401)
        if body.get("model") != self.model_name:
            received.status = 404
            unknown = {"message": f"model {body.get('model')!r} does not exist", "type": "invalid_request_error", "param": None, "code": None}
            return JSONResponse({"error": unknown}, status_code=404)
        answer = self.answer(body)
        if fault is None:
            return JSONResponse(answer)
        response = fault(answer)
        received.status = response.status_code
        return response


@contextmanager
def serve_embeddings(
    encoder: Encoder, *, model_name: str = "all-MiniLM-L6-v2", api_key: str | None = None, shuffle: bool = False, delay: float = 0.0
) -> Iterator[EmbeddingServer]:
    """An embeddings server for `encoder` on a free loopback port for the duration of the block;
    each answer waits `delay` seconds first (so that concurrent requests overlap)."""
    server = EmbeddingServer(encoder=encoder, model_name=model_name, api_key=api_key, shuffle=shuffle, delay=delay)
    with on_loopback(server.app(), lifespan="off") as port:
        server.base_url = f"http://127.0.0.1:{port}/v1"
        yield server
