"""The log-probability tests' requests: each item's whole text (no cut) sent to an endpoint that
scores a text it is sent, and the per-token log-probabilities read back
(`curation.evidence.membership`).

Where the requests go, by how the endpoint gives log-probabilities (`LogprobSupport`):
`completions_echo` posts to `{base_url}/completions` (OpenAI-compatible, `base_url` up to `/v1`);
`tgi_prefill` posts to TGI's own `/generate`, which lies at the server's root: a registered
`base_url` ending in `/v1` (TGI's OpenAI-compatible routes) has it taken off (`generate_url`).
Requests are greedy and retried as every probe request is (`curation.evidence.probe_runner.post_each`).
An answer that does not cover the text sent (`PromptNotCovered`) stops the run: it shows the
endpoint cannot score texts, and every other item would say the same.

The flow is `plan_membership` → `score_texts_sync` (target, and the reference where there is one)
→ `curation.evidence.membership_report.membership_report`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from curation.clock import EpochClock
from curation.evidence.membership import TextLogprobs, completions_echo_request, parse_completions_echo, parse_tgi_prefill, tgi_generate_request
from curation.evidence.probe_runner import NotRetried, Progress, excerpt, post_each
from curation.evidence.probing import format_options, items_to_probe
from schemas.evidence import ProbeEndpoint, ProbeItem
from schemas.model_registry import LogprobSupport


def scored_text(item: ProbeItem) -> str:
    """The text a log-probability test scores: the item's text, then its answer options one per
    line as `A. ...` where it has them (as the completion test's remainder writes them)."""
    text = item.text.strip()
    return f"{text}\n{format_options(item.options)}" if item.options else text


@dataclass(frozen=True)
class MembershipPlan:
    """What a log-probability test sends: `texts` (item id → the scored text, in the order sent)
    and `items` by id."""

    dataset: str
    split: str
    items: dict[str, ProbeItem]
    texts: dict[str, str]


def plan_membership(items: Sequence[ProbeItem], *, dataset: str, split: str) -> MembershipPlan:
    """Each item's scored text (`scored_text`). Raises `SealedItemRefused` if any item is sealed
    (sealed content is never probed, by any test) and `ValueError` on a repeated item id."""
    by_id = items_to_probe(items)
    return MembershipPlan(dataset=dataset, split=split, items=by_id, texts={item_id: scored_text(item) for item_id, item in by_id.items()})


@dataclass(frozen=True)
class TextScore:
    """The endpoint's log-probabilities of one item's text, or `error` (why none came back after
    `attempts` attempts)."""

    item_id: str
    logprobs: TextLogprobs | None
    error: str | None = None
    attempts: int = 0


def generate_url(base_url: str) -> str:
    """TGI's `/generate` for an endpoint registered at `base_url`: at the server's root, so a
    trailing `/v1` (where TGI serves its OpenAI-compatible routes) is taken off."""
    root = base_url.rstrip("/")
    return f"{root.removesuffix('/v1')}/generate"


def _json(response: httpx.Response, item_id: str) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise NotRetried(f"the answer for item {item_id} is not JSON: {excerpt(response)}") from exc


def score_texts_sync(
    client: httpx.Client,
    plan: MembershipPlan,
    endpoint: ProbeEndpoint,
    *,
    via: LogprobSupport,
    endpoint_name: str,
    clock: EpochClock,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress | None = None,
) -> list[TextScore]:
    """Ask `endpoint` for the log-probabilities of every text of `plan`, as `via` says it gives
    them; outcomes in plan order. Raises `ValueError` when `via` gives none of an item's own text
    (`none`, `chat`), and `PromptNotCovered` (naming `endpoint_name`) when an answer shows the
    endpoint does not score the text it is sent."""
    jobs = list(plan.texts.items())
    if via is LogprobSupport.COMPLETIONS_ECHO:
        url = f"{endpoint.base_url}/completions"

        def body(job: tuple[str, str]) -> dict[str, Any]:
            return completions_echo_request(job[1], model=endpoint.model)

        def read(response: httpx.Response, job: tuple[str, str]) -> TextLogprobs:
            return parse_completions_echo(_json(response, job[0]), job[1], endpoint=endpoint_name)

    elif via is LogprobSupport.TGI_PREFILL:
        url = generate_url(endpoint.base_url)

        def body(job: tuple[str, str]) -> dict[str, Any]:
            return tgi_generate_request(job[1])

        def read(response: httpx.Response, job: tuple[str, str]) -> TextLogprobs:
            return parse_tgi_prefill(_json(response, job[0]), job[1], endpoint=endpoint_name)

    else:
        raise ValueError(f"endpoint {endpoint_name!r} gives log-probabilities as {via.value!r}, which does not score a text it is sent")
    answers = post_each(client, jobs, endpoint, url=url, body=body, read=read, clock=clock, sleep=sleep, progress=progress)
    return [TextScore(item_id=item_id, logprobs=answer.value, error=answer.error, attempts=answer.attempts) for (item_id, _), answer in zip(jobs, answers, strict=True)]
