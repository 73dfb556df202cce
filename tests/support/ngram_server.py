"""A real language model small enough to train in the test setup, served over loopback HTTP as an
OpenAI-compatible chat-completions endpoint.

`WordNgramModel` is a word n-gram model with backoff, decoded greedily (temperature 0): trained on
a corpus, it reproduces a passage of it from a few words of context, which is memorisation in the
plain sense. It continues the end of the last user message, so a probe prompt that ends with the
item's prefix gets the model's continuation of that prefix.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.replay.server import Handler, ReplayServer, Reply, Request

START = "<s>"
END = "</s>"


@dataclass
class WordNgramModel:
    """Greedy word n-gram model: the next word is the most frequent follower of the longest context
    (up to `order − 1` words) seen in training, backing off to shorter contexts; where no context
    was seen, it starts a sentence of its own as training sentences start. Ties go to the follower
    seen first, so decoding is deterministic."""

    order: int
    next_word: dict[tuple[str, ...], str] = field(default_factory=dict)

    @classmethod
    def train(cls, texts: Iterable[str], order: int = 6) -> WordNgramModel:
        if order < 2:
            raise ValueError(f"order must be at least 2 (got {order})")
        followers: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
        for text in texts:
            words = [START, *text.split(), END]
            for index in range(1, len(words)):
                for size in range(1, order):
                    if index - size < 0:
                        break
                    followers[tuple(words[index - size : index])][words[index]] += 1
        model = cls(order=order)
        model.next_word = {context: counts.most_common(1)[0][0] for context, counts in followers.items()}
        return model

    def predict(self, context: list[str]) -> str:
        for size in range(min(self.order - 1, len(context)), 0, -1):
            word = self.next_word.get(tuple(context[-size:]))
            if word is not None:
                return word
        return self.next_word.get((START,), END)

    def continue_text(self, text: str, max_words: int) -> tuple[str, str]:
        """The greedy continuation of `text` (at most `max_words` words) and why it stopped (`stop` or `length`)."""
        context = text.split()
        produced: list[str] = []
        while len(produced) < max_words:
            word = self.predict(context)
            if word == END:
                return " ".join(produced), "stop"
            produced.append(word)
            context.append(word)
        return " ".join(produced), "length"


@dataclass
class ChatServer:
    """A running endpoint: `base_url` ends in `/v1`; `bodies` logs the request bodies received."""

    base_url: str
    model_name: str
    bodies: list[dict[str, Any]] = field(default_factory=list)


def _handler(model: WordNgramModel, server: ChatServer) -> Handler:
    def handle(request: Request) -> Reply:
        if request.method == "GET" and request.path == "/v1/models":
            return Reply(json={"object": "list", "data": [{"id": server.model_name, "object": "model", "owned_by": "tests"}]})
        if request.method != "POST" or request.path != "/v1/chat/completions":
            return Reply(status=404, json={"error": {"message": f"no route {request.method} {request.path}", "type": "invalid_request_error"}})
        body = json.loads(request.body)
        server.bodies.append(body)
        if body.get("model") != server.model_name:
            return Reply(status=404, json={"error": {"message": f"model {body.get('model')!r} does not exist", "type": "invalid_request_error"}})
        if body.get("temperature", 1) != 0:
            return Reply(status=400, json={"error": {"message": "this model only decodes greedily: send temperature 0", "type": "invalid_request_error"}})
        user = [message["content"] for message in body["messages"] if message["role"] == "user"]
        content, finish = model.continue_text(user[-1] if user else "", max_words=int(body.get("max_tokens") or 256))
        prompt_words = sum(len(message["content"].split()) for message in body["messages"])
        return Reply(
            json={
                "id": f"chatcmpl-{len(server.bodies)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": server.model_name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt_words, "completion_tokens": len(content.split()), "total_tokens": prompt_words + len(content.split())},
            }
        )

    return handle


@contextmanager
def serve_model(model: WordNgramModel, model_name: str = "ngram-6") -> Iterator[ChatServer]:
    """Serve `model` on a free loopback port for the duration of the block."""
    server = ChatServer(base_url="", model_name=model_name)
    replay = ReplayServer(_handler(model, server)).start()
    server.base_url = f"{replay.url}/v1"
    try:
        yield server
    finally:
        replay.stop()
