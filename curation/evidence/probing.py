"""Completion probing: cut each item in two, ask the model to reproduce the second part exactly,
score how close it came, and compare items dated before the model's training cutoff with a control
band of items dated after it (which the model cannot have seen in training).

The flow is `plan_probes` here (cuts and prompts) → a runner in `curation.evidence.probe_runner`
(completions over HTTP) → `curation.evidence.probe_report` (similarities against the control band).
Sealed items are refused at planning: sealed content is never probed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from rapidfuzz.distance import Levenshtein

from curation.evidence.clean_band import NearTo
from curation.refusals import Refused
from schemas.evidence import ChatMessage, CutMode, CutPolicy, ProbeCut, ProbeItem, ProbePrompt
from schemas.probe_tests import ProbeMetric

SYSTEM_PROMPT = "You reproduce items from datasets exactly as they appear in the dataset."

_WORD = re.compile(r"\S+")
_SPACE = re.compile(r"\s+")


class CannotCut(ValueError):
    """The item is too short to cut under the policy, or the policy needs options it lacks."""


class SealedItemRefused(Refused):
    """A sealed item was handed to the probe (409, `sealed_item`): sealed content is never probed,
    and nothing was sent. Answered as every refused decision is (a problem, an exit status)."""

    def __init__(self, detail: str) -> None:
        super().__init__("sealed_item", detail, 409)


def format_options(options: Sequence[str]) -> str:
    """Answer options one per line in their original order, lettered `A.`, `B.`, ... (numbered past 26)."""
    labels = [chr(ord("A") + index) if len(options) <= 26 else str(index + 1) for index in range(len(options))]
    return "\n".join(f"{label}. {' '.join(option.split())}" for label, option in zip(labels, options, strict=True))


def cut_item(item: ProbeItem, policy: CutPolicy | None = None) -> ProbeCut:
    """Cut `item` into the prefix shown to the model and the remainder it should reproduce.

    Word-boundary cuts fall at the start of the word nearest to `policy.fraction` of the text's
    characters, keeping at least `min_prefix_words` before and `min_remainder_words` after; answer
    options, when the item has them, follow in the remainder in their original order. Cuts before
    the options show the whole text and leave the options as the remainder. Raises `CannotCut`.
    """
    policy = policy or CutPolicy()
    text = item.text.strip()
    use_options = policy.mode == CutMode.BEFORE_OPTIONS or (policy.mode == CutMode.AUTO and bool(item.options))
    if use_options:
        if not item.options:
            raise CannotCut(f"item {item.item_id} has no answer options to cut before (use mode 'auto' or 'word_boundary')")
        return ProbeCut(item_id=item.item_id, prefix=text, remainder=format_options(item.options), cut_at=len(item.text), mode=CutMode.BEFORE_OPTIONS)
    starts = [match.start() for match in _WORD.finditer(text)]
    candidates = starts[policy.min_prefix_words : len(starts) - policy.min_remainder_words + 1]
    if not candidates:
        raise CannotCut(f"item {item.item_id} has {len(starts)} words; a cut needs at least {policy.min_prefix_words} before and {policy.min_remainder_words} after")
    target = policy.fraction * len(text)
    cut_at = min(candidates, key=lambda start: abs(start - target))
    remainder = text[cut_at:]
    if item.options:
        remainder = f"{remainder}\n{format_options(item.options)}"
    offset = len(item.text) - len(item.text.lstrip())
    return ProbeCut(item_id=item.item_id, prefix=text[:cut_at].rstrip(), remainder=remainder, cut_at=offset + cut_at, mode=CutMode.WORD_BOUNDARY)


def max_tokens_for(remainder: str, cap: int) -> int:
    """The answer's token budget: about one token per three characters of the remainder plus slack
    (English runs near four), so a faithful reproduction is never truncated; at most `cap`."""
    return max(1, min(cap, math.ceil(len(remainder) / 3) + 16))


def build_prompt(cut: ProbeCut, *, dataset: str, split: str, with_options: bool, max_tokens_cap: int = 512) -> ProbePrompt:
    """The probe prompt for one cut item: names the dataset and split, asks for the rest of the item
    exactly (with the answer options in their original order where `with_options`), and ends with
    the prefix so that the answer continues it."""
    options = ", including its answer options in their original order, one per line as 'A. ...'" if with_options else ""
    user = (
        f"Here is the first part of an item from the {split} split of the {dataset} dataset. "
        f"Write the rest of the item exactly as it appears in the dataset, word for word{options}. "
        "Do not explain, summarise or repeat the first part: reply with the rest of the item only.\n\n"
        f"First part:\n{cut.prefix}"
    )
    return ProbePrompt(
        item_id=cut.item_id,
        messages=(ChatMessage(role="system", content=SYSTEM_PROMPT), ChatMessage(role="user", content=user)),
        max_tokens=max_tokens_for(cut.remainder, max_tokens_cap),
    )


@dataclass(frozen=True)
class ProbePlan:
    """What to send and what to compare against: `prompts` in item order, `cuts` and `items` by id,
    `not_cut` (item id → reason) for items the policy could not cut, and `near_pre_cutoff` (item
    id → what it is near) for items left out of the control band before any was chosen
    (`curation.evidence.clean_band`)."""

    dataset: str
    split: str
    policy: CutPolicy
    items: dict[str, ProbeItem]
    cuts: dict[str, ProbeCut]
    prompts: list[ProbePrompt]
    not_cut: dict[str, str] = field(default_factory=dict)
    near_pre_cutoff: Mapping[str, NearTo] = field(default_factory=dict)


def items_to_probe(items: Sequence[ProbeItem]) -> dict[str, ProbeItem]:
    """The items by id, in the order given, for any probe test. Raises `SealedItemRefused` if any
    item is sealed (before anything is sent) and `ValueError` on a repeated item id."""
    sealed = [item.item_id for item in items if item.sealed]
    if sealed:
        raise SealedItemRefused(f"{len(sealed)} sealed items were handed to the probe (first: {sealed[0]}); sealed content is never probed; nothing was sent")
    by_id: dict[str, ProbeItem] = {}
    for item in items:
        if item.item_id in by_id:
            raise ValueError(f"item id {item.item_id} appears twice; each probed item needs a unique id")
        by_id[item.item_id] = item
    return by_id


def plan_probes(
    items: Sequence[ProbeItem],
    *,
    dataset: str,
    split: str,
    policy: CutPolicy | None = None,
    max_tokens_cap: int = 512,
    near_pre_cutoff: Mapping[str, NearTo] | None = None,
) -> ProbePlan:
    """Cut every item and build its prompt. Raises `SealedItemRefused` if any item is sealed and
    `ValueError` on a repeated item id; items that cannot be cut are listed in `not_cut`.
    `near_pre_cutoff`: the items already left out of the control band, which the report counts."""
    policy = policy or CutPolicy()
    by_id = items_to_probe(items)
    cuts: dict[str, ProbeCut] = {}
    prompts: list[ProbePrompt] = []
    not_cut: dict[str, str] = {}
    for item in items:
        try:
            cut = cut_item(item, policy)
        except CannotCut as exc:
            not_cut[item.item_id] = str(exc)
            continue
        cuts[item.item_id] = cut
        prompts.append(build_prompt(cut, dataset=dataset, split=split, with_options=bool(item.options), max_tokens_cap=max_tokens_cap))
    return ProbePlan(dataset=dataset, split=split, policy=policy, items=by_id, cuts=cuts, prompts=prompts, not_cut=not_cut, near_pre_cutoff=dict(near_pre_cutoff or {}))


# --- scoring ----------------------------------------------------------------------------------


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def longest_common_substring(a: str, b: str) -> int:
    """The length of the longest run of characters that `a` and `b` share (exact)."""
    if not a or not b:
        return 0
    return SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b)).size


def scored_answer(completion: str, *, prefix: str = "") -> str:
    """The completion as it is scored: whitespace runs as one space, and without `prefix` where it
    starts by repeating it (models often echo the part they were shown)."""
    answer = _normalise(completion)
    shown = _normalise(prefix)
    if shown and answer.startswith(shown):
        answer = answer[len(shown) :].lstrip()
    return answer


def scored_remainder(remainder: str) -> str:
    """The true remainder as it is scored: whitespace runs as one space."""
    return _normalise(remainder)


def similarity(completion: str, remainder: str, *, prefix: str = "") -> dict[ProbeMetric, float]:
    """How closely `completion` reproduces `remainder`, each metric in [0, 1].

    Whitespace runs count as one space on both sides, and a completion that starts by repeating
    `prefix` is scored without it (models often echo the part they were shown). `levenshtein` is
    rapidfuzz's normalised Levenshtein similarity (1 − distance / the longer length), so rambling
    past the remainder costs; `lcs_ratio` is the longest common substring over the remainder's
    length, the longest verbatim run, which rambling does not hide.
    """
    truth = _normalise(remainder)
    answer = scored_answer(completion, prefix=prefix)
    if not truth:
        raise ValueError("the remainder is empty: there is nothing to reproduce")
    return {
        ProbeMetric.LEVENSHTEIN: float(Levenshtein.normalized_similarity(answer, truth)),
        ProbeMetric.LCS_RATIO: longest_common_substring(truth, answer) / len(truth),
    }
