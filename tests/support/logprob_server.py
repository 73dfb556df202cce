"""A smoothed character n-gram model (`tests.support.ngram_lm.CharNgramModel`) served over loopback
HTTP the three ways servers give text and log-probabilities:

- `POST /v1/chat/completions`: greedy text continuing the last user message (the completion test);
- `POST /v1/completions` with `echo` and `logprobs`: OpenAI's legacy shape, the prompt's tokens
  (one per character) with their log-probabilities (the first null) and each position's top-k, then
  one generated token (vLLM's and OpenAI's behaviour); with `scores_prompt=False`, only the
  generated token's, as llama.cpp's server has been reported to answer;
- `POST /generate` at the root with `decoder_input_details`: TGI's `details.prefill` (a `<s>` first,
  with a null log-probability; no top-k).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.replay.server import Handler, ReplayServer, Reply, Request
from tests.support.ngram_lm import CharNgramModel
from tests.support.ngram_server import ChatServer


def _error(status: int, message: str) -> Reply:
    return Reply(status=status, json={"error": {"message": message, "type": "invalid_request_error"}})


def _chat(model: CharNgramModel, server: ChatServer, body: dict[str, Any]) -> Reply:
    user = [message["content"] for message in body["messages"] if message["role"] == "user"]
    content, finish = model.greedy(user[-1] if user else "", max_chars=3 * int(body.get("max_tokens") or 256))
    choice = {"index": 0, "message": {"role": "assistant", "content": content.strip()}, "finish_reason": finish}
    return Reply(json={"id": f"chatcmpl-{len(server.bodies)}", "object": "chat.completion", "created": int(time.time()), "model": server.model_name, "choices": [choice]})


def _completions(model: CharNgramModel, server: ChatServer, body: dict[str, Any], *, scores_prompt: bool) -> Reply:
    if int(body.get("max_tokens", 16)) < 1:
        return _error(400, "max_tokens must be at least 1, got 0.")
    prompt, top = str(body["prompt"]), int(body.get("logprobs") or 0)
    generated, _ = model.greedy(prompt, max_chars=1)
    scored = model.token_logprobs(prompt + generated, top=max(top, 1))
    tokens = [char for char, _, _ in scored]
    logprobs: list[float | None] = [logprob for _, logprob, _ in scored]
    tops: list[dict[str, float] | None] = [alternatives if top else None for _, _, alternatives in scored]
    offsets = list(range(len(tokens)))
    logprobs[0], tops[0] = None, None
    if not scores_prompt:
        keep = slice(len(prompt), None)
        tokens, logprobs, tops, offsets = tokens[keep], logprobs[keep], tops[keep], offsets[keep]
    text = prompt + generated if body.get("echo") else generated
    choice = {"index": 0, "text": text, "logprobs": {"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": tops, "text_offset": offsets}, "finish_reason": "length"}
    return Reply(json={"id": f"cmpl-{len(server.bodies)}", "object": "text_completion", "created": int(time.time()), "model": server.model_name, "choices": [choice]})


def _generate(model: CharNgramModel, body: dict[str, Any]) -> Reply:
    parameters = body.get("parameters") or {}
    if parameters.get("do_sample"):
        return _error(400, "this model only decodes greedily")
    prompt = str(body["inputs"])
    generated, _ = model.greedy(prompt, max_chars=1)
    details: dict[str, Any] = {"finish_reason": "length", "generated_tokens": 1, "seed": None, "tokens": [{"id": 0, "text": generated, "logprob": -1.0, "special": False}]}
    if parameters.get("decoder_input_details"):
        prefill = [{"id": 1, "text": "<s>", "logprob": None}]
        prefill += [{"id": 2 + index, "text": char, "logprob": logprob} for index, (char, logprob, _) in enumerate(model.token_logprobs(prompt, top=1))]
        details["prefill"] = prefill
    return Reply(json={"generated_text": generated, "details": details if parameters.get("details") else None})


def _handler(model: CharNgramModel, server: ChatServer, *, scores_prompt: bool) -> Handler:
    routes = ("/v1/chat/completions", "/v1/completions", "/generate")

    def handle(request: Request) -> Reply:
        if request.method != "POST" or request.path not in routes:
            return _error(404, f"no route {request.method} {request.path}")
        body = json.loads(request.body)
        server.bodies.append({"path": request.path, **body})
        if request.path == "/generate":
            return _generate(model, body)
        if body.get("model") != server.model_name:
            return _error(404, f"model {body.get('model')!r} does not exist")
        if body.get("temperature", 1) != 0:
            return _error(400, "this model only decodes greedily: send temperature 0")
        if request.path == "/v1/completions":
            return _completions(model, server, body, scores_prompt=scores_prompt)
        return _chat(model, server, body)

    return handle


@contextmanager
def serve_language_model(model: CharNgramModel, model_name: str, *, scores_prompt: bool = True) -> Iterator[ChatServer]:
    """Serve `model` on a free loopback port for the duration of the block (`base_url` ends in
    `/v1`; `bodies` logs each request body with its `path`)."""
    server = ChatServer(base_url="", model_name=model_name)
    replay = ReplayServer(_handler(model, server, scores_prompt=scores_prompt)).start()
    server.base_url = f"{replay.url}/v1"
    try:
        yield server
    finally:
        replay.stop()
