"""A trained model behind a loopback OpenAI-compatible endpoint, so that the product's own clients
(the completion probe's runner, the log-probability answer parser) talk to it over HTTP.

- `POST /v1/chat/completions`, greedy only (temperature 0): the model continues the last user
  message's last paragraph (what follows its last blank line, without a leading label line such
  as `First part:`). A base model has no instruction tuning, so the probe's instruction would only
  be noise before the prefix; this favours the probe, as `tests/support/ngram_server.py` does.
- `POST /v1/completions` with `echo` and `logprobs` (OpenAI's legacy shape, as vLLM and
  llama.cpp's OpenAI-compatible servers answer it): `choices[0].logprobs` holds `tokens`,
  `token_logprobs` (the first null, as OpenAI has no context for it), `top_logprobs` (the first
  null) and `text_offset`. `max_tokens` 0 scores the prompt only; above 0, the greedy continuation
  follows the echoed prompt (its tokens get log-probabilities too).

Every text is scored after an EOS token, as items are placed in training.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from tokenizers import Tokenizer
from transformers import GPT2LMHeadModel

from bench.tinylm.model import eos_id
from tests.replay.server import ReplayServer, Reply, Request

MAX_TOP_LOGPROBS = 20


@dataclass
class LoadedModel:
    name: str
    model: GPT2LMHeadModel
    tokenizer: Tokenizer
    device: str = "cpu"
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def eos(self) -> int:
        return eos_id(self.tokenizer)

    @property
    def block(self) -> int:
        return int(self.model.config.n_positions)

    def continue_text(self, text: str, max_tokens: int) -> tuple[str, str, list[int]]:
        """Greedy continuation of `text`: (text, finish reason, token ids)."""
        ids = self.tokenizer.encode(text).ids
        room = max(1, min(max_tokens, self.block // 2))
        context = [self.eos, *ids][-(self.block - room) :]
        with self.lock, torch.no_grad():
            output = self.model.generate(
                torch.tensor([context], device=self.device), attention_mask=torch.ones((1, len(context)), dtype=torch.long, device=self.device),
                max_new_tokens=room, do_sample=False, eos_token_id=self.eos, pad_token_id=self.eos,
            )  # fmt: skip
        new = output[0, len(context) :].tolist()
        finish = "length"
        if self.eos in new:
            new, finish = new[: new.index(self.eos)], "stop"
        return self.tokenizer.decode(new), finish, new

    def echo(self, text: str, top: int, generated: list[int] | None = None) -> dict[str, Any]:
        """OpenAI legacy `logprobs` of `text` (first token null), then of the `generated` token ids
        that followed it (not tokenised again, so the prompt's tokens stay as they were)."""
        encoding = self.tokenizer.encode(text)
        offsets = list(encoding.offsets)
        tokens = [text[start:end] for start, end in offsets]
        for index in generated or []:
            piece = self.tokenizer.decode([index])
            offsets.append((offsets[-1][1] if offsets else 0, (offsets[-1][1] if offsets else 0) + len(piece)))
            tokens.append(piece)
        ids = [*encoding.ids, *(generated or [])][: self.block - 1]
        with self.lock, torch.no_grad():
            logits = self.model(torch.tensor([[self.eos, *ids]], device=self.device)).logits[0, :-1].float()
            logprobs = torch.log_softmax(logits, dim=-1)
            chosen = logprobs.gather(1, torch.tensor(ids, device=self.device)[:, None])[:, 0].tolist()
            best = torch.topk(logprobs, k=max(1, top), dim=-1) if top else None
        tops: list[dict[str, float] | None] = [None]
        for position in range(1, len(ids)):
            if best is None:
                tops.append({})
                continue
            pairs: dict[str, float] = {}
            for value, index in zip(best.values[position].tolist(), best.indices[position].tolist(), strict=True):
                pairs.setdefault(self.tokenizer.decode([index]), value)
            tops.append(pairs)
        return {"tokens": tokens[: len(ids)], "token_logprobs": [None, *chosen[1:]], "top_logprobs": tops, "text_offset": [start for start, _ in offsets[: len(ids)]]}


def probe_context(user: str) -> str:
    """What the chat endpoint continues: the last paragraph of the last user message, without a
    leading label line (`First part:`)."""
    paragraph = user.rsplit("\n\n", 1)[-1]
    first, _, rest = paragraph.partition("\n")
    return rest if rest and first.rstrip().endswith(":") else paragraph


def _error(status: int, message: str) -> Reply:
    return Reply(status=status, json={"error": {"message": message, "type": "invalid_request_error"}})


def _chat(loaded: LoadedModel, body: dict[str, Any]) -> Reply:
    if body.get("temperature", 1) != 0:
        return _error(400, "this model only decodes greedily: send temperature 0")
    user = [message["content"] for message in body["messages"] if message["role"] == "user"]
    content, finish, new = loaded.continue_text(probe_context(user[-1] if user else ""), int(body.get("max_tokens") or 256))
    return Reply(
        json={
            "id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()), "model": loaded.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": {"completion_tokens": len(new)},
        }
    )  # fmt: skip


def _completion(loaded: LoadedModel, body: dict[str, Any]) -> Reply:
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            return _error(400, "send one prompt string")
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt:
        return _error(400, "prompt must be a non-empty string")
    top = body.get("logprobs")
    if top is not None and (not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS):
        return _error(400, f"logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS}")
    max_tokens = int(body.get("max_tokens", 16))
    echo = bool(body.get("echo"))
    continuation, finish = "", "length"
    new: list[int] = []
    if max_tokens > 0:
        if body.get("temperature", 1) != 0:
            return _error(400, "this model only decodes greedily: send temperature 0")
        continuation, finish, new = loaded.continue_text(prompt, max_tokens)
    text = (prompt if echo else "") + continuation
    logprobs = None
    if top is not None:
        scored = loaded.echo(prompt, top, new)
        if not echo:
            keep = [index for index, offset in enumerate(scored["text_offset"]) if offset >= len(prompt)]
            scored = {key: [values[index] for index in keep] for key, values in scored.items()}
            scored["text_offset"] = [offset - len(prompt) for offset in scored["text_offset"]]
        logprobs = scored
    return Reply(
        json={
            "id": f"cmpl-{time.time_ns()}", "object": "text_completion", "created": int(time.time()), "model": loaded.name,
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}],
        }
    )  # fmt: skip


def _handler(models: dict[str, LoadedModel]) -> Any:
    def handle(request: Request) -> Reply:
        if request.method == "GET" and request.path == "/v1/models":
            return Reply(json={"object": "list", "data": [{"id": name, "object": "model", "owned_by": "bench"} for name in models]})
        routes = {"/v1/chat/completions": _chat, "/v1/completions": _completion}
        if request.method != "POST" or request.path not in routes:
            return _error(404, f"no route {request.method} {request.path}")
        body = json.loads(request.body)
        loaded = models.get(body.get("model"))
        if loaded is None:
            return _error(404, f"model {body.get('model')!r} does not exist")
        return routes[request.path](loaded, body)

    return handle


@contextmanager
def serve(models: dict[str, LoadedModel]) -> Iterator[str]:
    """Serve the models (by name) on a free loopback port; yields the base URL ending in `/v1`."""
    replay = ReplayServer(_handler(models)).start()
    try:
        yield f"{replay.url}/v1"
    finally:
        replay.stop()
