"""Inspect AI integration: a release as an Inspect dataset, and a run as an Inspect task whose
scores are posted back to goldenset (install the `inspect` extra: `inspect-ai==0.3.285`).

    from inspect_ai import eval
    from inspect_ai.scorer import includes
    from goldenset_client import Client
    from goldenset_client.inspect import goldenset_task

    with Client.from_env() as client:
        task = goldenset_task(client, "ops", model="acme-1", endpoint="acme-1-zdr", scorer=includes())
        [log] = eval(task, model="openai/acme-1")
        print(client.get_run(task.metadata["goldenset_run_id"]).score)

`goldenset_dataset` only reads (an export of a split; nothing is recorded). `goldenset_task` starts
a run, so the exposure ledger records which endpoint saw which items before any of them is sent;
the run's items, exactly, become the samples. Only this module imports `inspect_ai`: the rest of
the client never needs it.
"""

from __future__ import annotations

import logging
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timezone
from typing import Any

import anyio
from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.hooks import Hooks, RunEnd, RunStart, TaskEnd, TaskStart, hooks
from inspect_ai.log import EvalLog
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr, value_to_float
from inspect_ai.solver import Solver, TaskState

from goldenset_client.client import Client
from goldenset_client.models import ResultIn, ResultsAccepted, RunItemRead, RunStarted

__all__ = ["RUN_ID", "goldenset_dataset", "goldenset_task", "pending_results", "post_pending_results", "results_from_log"]

RUN_ID = "goldenset_run_id"
"""The key of the goldenset run id in a task's `metadata` (and so in its log's `eval.metadata`)."""

SCORE_KEY = "goldenset"
"""The key, in each posted sample score's `metadata`, of `{run_id, item_id, score, value}`."""

logger = logging.getLogger(__name__)


def cutoff_instant(cutoff: date) -> datetime:
    """00:00 UTC on a training cutoff: the first instant counted as after it (as the server's
    temporal split counts it)."""
    return datetime.combine(cutoff, time(0, 0), tzinfo=timezone.utc)


def goldenset_dataset(
    client: Client,
    eval_name: str,
    *,
    release: int | str = "latest",
    split: str = "dev",
    model: str | None = None,
    occurred_after: datetime | None = None,
) -> MemoryDataset:
    """One split of a release as an Inspect dataset, read from its export: one `Sample` per item,
    newest incident first, with `id` the item id, `input` its input, `target` its reference, and
    `metadata` {occurred_at (ISO 8601 text, as released), source, external_id, title, tags, eval,
    release, canary, content_digest}.

    `model` (a registered model's name) without `occurred_after` keeps only the items that occurred
    on or after the model's training cutoff (00:00 UTC on that date); `ValueError` when the model
    has none registered. Reading records no exposure: to send the items to a model, start a run
    (`goldenset_task`). The sealed split needs the sealed scope and takes one unit of its budget."""
    if model is not None and occurred_after is None:
        cutoff = client.get_model(model).training_cutoff
        if cutoff is None:
            raise ValueError(f"model {model!r} has no training cutoff registered; give occurred_after, or record the cutoff with update_model")
        occurred_after = cutoff_instant(cutoff)
    samples: list[Sample] = []
    number: int | None = None
    for row in client.iter_export(eval_name, release=release, split=split, occurred_after=occurred_after):
        number = row.metadata.release
        metadata = {
            "occurred_at": row.occurred_at, "source": row.source, "external_id": row.external_id, "title": row.title, "tags": list(row.tags),
            "eval": row.metadata.eval, "release": row.metadata.release, "canary": row.metadata.canary, "content_digest": row.content_digest,
        }  # fmt: skip
        samples.append(Sample(id=row.id, input=row.input, target=row.reference, metadata=metadata))
    label = f"{eval_name}/r{number if number is not None else release}/{split}"
    return MemoryDataset(samples, name=f"goldenset:{label}", location=f"{client.settings.base_url}#{label}")


def _run_samples(client: Client, run: RunStarted) -> list[Sample]:
    items: list[RunItemRead] = list(run.items)
    if len(items) < run.item_count:
        items = list(client.iter_run_items(run.id))
    samples = []
    for item in items:
        content = item.content
        metadata = {
            "occurred_at": str(content.get("occurred_at", item.occurred_at.isoformat())), "source": content.get("source", ""),
            "external_id": content.get("external_id", ""), "title": content.get("title", ""), "tags": list(content.get("tags", [])),
            "eval": run.eval, "release": run.release, "canary": run.canary, "content_digest": item.content_digest,
        }  # fmt: skip
        samples.append(Sample(id=item.item_id, input=str(content.get("input", "")), target=str(content.get("reference", "")), metadata=metadata))
    return samples


def _task_name(eval_name: str, release: int, split: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", f"goldenset_{eval_name}_r{release}_{split}".lower())


@dataclass
class _Recording:
    """The scores of one goldenset run taken so far in this process, by item (one per epoch), and
    those already posted."""

    client: Client
    run_id: int
    scores: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    posted: dict[int, float] = field(default_factory=dict)
    error: BaseException | None = None

    def pending(self) -> list[ResultIn]:
        results = []
        for item_id, values in sorted(self.scores.items()):
            score = sum(values) / len(values)
            if self.posted.get(item_id) != score:
                results.append(ResultIn(item_id=item_id, score=score))
        return results

    def post(self) -> ResultsAccepted | None:
        """Post the scores not posted yet (none: None). Raises what the client raises; what was
        not accepted stays pending."""
        results = self.pending()
        if not results:
            return None
        try:
            answer = self.client.post_results(self.run_id, results)
        except Exception as exc:
            self.error = exc
            raise
        self.error = None
        self.posted.update((result.item_id, result.score) for result in results)
        return answer


_RECORDINGS: dict[int, _Recording] = {}
"""Every run started by `goldenset_task` in this process, by goldenset run id."""


def pending_results(run_id: int) -> list[ResultIn]:
    """The scores of a run taken in this process and not posted yet (an epochs' mean per item)."""
    recording = _RECORDINGS.get(run_id)
    return recording.pending() if recording is not None else []


def post_pending_results(run_id: int) -> ResultsAccepted | None:
    """Post, now, the scores of a run taken in this process and not posted yet: after the end-of-task
    posting failed (it logs a warning and keeps them), or to post a cancelled eval's scores. None
    when nothing is pending. Safe to repeat: a score posted again unchanged is accepted."""
    recording = _RECORDINGS.get(run_id)
    return recording.post() if recording is not None else None


def results_from_log(log: EvalLog) -> tuple[int, list[ResultIn]]:
    """The goldenset run id of a log written by a `goldenset_task`, and its scores as `ResultIn` (an
    epochs' mean per item), read from the samples' scores: post them from any process with
    `client.post_results(run_id, results)` (for instance from a log file read with
    `inspect_ai.log.read_eval_log`). `ValueError` for a log of another task."""
    metadata = log.eval.metadata or {}
    if RUN_ID not in metadata:
        raise ValueError(f"the log of task {log.eval.task!r} was not written by a goldenset task (no {RUN_ID} in its metadata)")
    run_id = int(metadata[RUN_ID])
    scores: dict[int, list[float]] = defaultdict(list)
    for sample in log.samples or []:
        for score in (sample.scores or {}).values():
            mark = (score.metadata or {}).get(SCORE_KEY)
            if isinstance(mark, dict) and mark.get("run_id") == run_id:
                scores[int(mark["item_id"])].append(float(mark["score"]))
    return run_id, [ResultIn(item_id=item_id, score=sum(values) / len(values)) for item_id, values in sorted(scores.items())]


def _run_id(metadata: dict[str, Any] | None) -> int | None:
    value = (metadata or {}).get(RUN_ID)
    return value if isinstance(value, int) else None


@hooks(name="goldenset_results", description="Posts the scores of goldenset tasks to their goldenset run when each task ends.")
class GoldensetResults(Hooks):
    """Posts a goldenset task's scores to its run: at the end of the task, and at the end of the
    eval for the tasks that did not reach their end (cancelled, or stopped by an error). A failed
    posting is logged as a warning and its scores stay pending (`post_pending_results`); it never
    fails the eval."""

    def __init__(self) -> None:
        self._active: dict[str, set[int]] = defaultdict(set)

    def enabled(self) -> bool:
        return bool(_RECORDINGS)

    async def on_run_start(self, data: RunStart) -> None:
        self._active.setdefault(data.run_id, set())

    async def on_task_start(self, data: TaskStart) -> None:
        run_id = _run_id(data.spec.metadata)
        if run_id is not None:
            self._active[data.run_id].add(run_id)

    async def on_task_end(self, data: TaskEnd) -> None:
        run_id = _run_id(data.log.eval.metadata)
        if run_id is not None:
            await _post(run_id)

    async def on_run_end(self, data: RunEnd) -> None:
        for run_id in sorted(self._active.pop(data.run_id, set())):
            await _post(run_id)


async def _post(run_id: int) -> None:
    recording = _RECORDINGS.get(run_id)
    if recording is None:
        return
    try:
        answer = await anyio.to_thread.run_sync(recording.post)
    except Exception as exc:
        logger.warning("goldenset run %s: posting its scores failed (%s); they stay pending, post them with post_pending_results(%s)", run_id, exc, run_id)
        return
    if answer is None:
        return
    logger.info("goldenset run %s: %s item(s) scored, %s remaining", run_id, answer.scored, answer.remaining)
    try:
        summary = await anyio.to_thread.run_sync(recording.client.get_run, run_id)
    except Exception as exc:  # the scores are posted; only the summary could not be read
        logger.warning("goldenset run %s: its scores are posted, but reading the run back failed (%s)", run_id, exc)
        return
    interval = summary.score
    if interval.mean is not None:
        logger.info("goldenset run %s: mean score %.3f [%.3f, %.3f] (%s, n=%s)", run_id, interval.mean, interval.low, interval.high, interval.method, interval.n)
    logger.info("%s", summary.scale_line())


def _recording_scorer(inner: Scorer, recording: _Recording) -> Scorer:
    to_float = value_to_float()

    @scorer(metrics=[mean(), stderr()], name="goldenset")
    def goldenset() -> Scorer:
        async def score(state: TaskState, target: Target) -> Score | None:
            scored = await inner(state, target)
            if scored is None:
                return None
            value = to_float(scored.value)
            if math.isnan(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"the scorer gave {scored.value!r} for item {state.sample_id}, which is {value} as a float: goldenset takes scores in [0, 1]")
            item_id = int(state.sample_id)
            recording.scores[item_id].append(value)
            mark = {"run_id": recording.run_id, "item_id": item_id, "score": value, "value": scored.value}
            metadata = {**(scored.metadata or {}), SCORE_KEY: mark}
            return Score(value=value, answer=scored.answer, explanation=scored.explanation, metadata=metadata)

        return score

    return goldenset()


def goldenset_task(
    client: Client,
    eval_name: str,
    *,
    model: str,
    endpoint: str,
    scorer: Scorer,
    solver: Solver | list[Solver] | None = None,
    release: int | str = "latest",
    split: str = "dev",
    occurred_after: datetime | None = None,
    name: str | None = None,
) -> Task:
    """An Inspect task over a goldenset run, whose scores are posted to the run.

    Calling it STARTS A RUN (`client.start_run`) of the registered `model` through `endpoint`: the
    exposure ledger records that the endpoint saw the run's items (under its terms now), so start
    one only for an eval you mean to run, against the model that `endpoint` serves. The run's items
    become the samples, exactly (ids are item ids; input, target and metadata as in
    `goldenset_dataset`); `occurred_after` keeps only items that occurred on or after it (default:
    all, so the temporal split can compare both sides of the model's cutoff). The sealed split
    needs the sealed scope and an endpoint the gate allows (`Forbidden` otherwise, before any run).

    `scorer` is wrapped in the scorer `goldenset`, whose value is the inner value as a float
    (`inspect_ai.scorer.value_to_float()`: C 1, I 0, P 0.5, numbers as they are) with metrics mean
    and stderr; the inner value, answer and explanation stay in the score. A value outside [0, 1]
    fails its sample. With several epochs an item's score is the mean of its epochs.

    Posting: when the task ends (success, or samples in error within `fail_on_error`), a hook posts
    every score taken to the run with `client.post_results`, in batches; the tasks of an eval that
    stops early (cancelled, an error) are posted when the eval ends. Items without a score (their
    sample failed) stay unscored: the run shows them as `remaining`. A failed posting (after the
    client's retries) is logged as a warning and does not fail the eval: the scores stay pending
    in this process (`post_pending_results(run_id)`), and `results_from_log(log)` rebuilds them from
    the log in any process. Posting again is safe: a score posted before with the same value is
    accepted unchanged (a different one is refused: `Conflict`). After posting, the hook logs the
    run's mean with its interval and where the run stands on the eval's common scale
    (`RunSummary.scale_line()`: its equated score on the reference release, once the background
    refit holds it).

    The task's `metadata[RUN_ID]` ("goldenset_run_id") is the run id (`client.get_run(run_id)` shows
    the scores), also in the log's `eval.metadata`; `metadata["goldenset_warning"]` is the server's
    warning when the endpoint may train on the items. `name` defaults to
    `goldenset_<eval>_r<release>_<split>`. The Inspect model is chosen as usual (`eval(task,
    model=...)`); `model` and `endpoint` here are goldenset's registry names for it."""
    run = client.start_run(eval_name, model=model, endpoint=endpoint, release=release, split=split, occurred_after=occurred_after)
    recording = _Recording(client=client, run_id=run.id)
    _RECORDINGS[run.id] = recording
    label = f"{run.eval}/r{run.release}/{run.split}"
    dataset = MemoryDataset(_run_samples(client, run), name=f"goldenset:{label}", location=f"{client.settings.base_url}#{label}")
    metadata: dict[str, Any] = {
        RUN_ID: run.id, "goldenset_eval": run.eval, "goldenset_release": run.release, "goldenset_split": run.split,
        "goldenset_model": run.model, "goldenset_endpoint": run.endpoint, "goldenset_canary": run.canary, "goldenset_warning": run.warning,
    }  # fmt: skip
    task_name = name or _task_name(run.eval, run.release, run.split)
    wrapped = _recording_scorer(scorer, recording)
    if solver is None:
        return Task(dataset=dataset, scorer=wrapped, name=task_name, metadata=metadata)
    return Task(dataset=dataset, solver=solver, scorer=wrapped, name=task_name, metadata=metadata)
