"""Scores of an lm-evaluation-harness run of an exported task, posted to a goldenset run.

`goldenset export --format lm-eval` writes a task whose rows are a release's items (each row's
`id` is the item id and `metadata` names the eval, release and canary). `lm_eval ... --log_samples
--output_path DIR` writes, per task, `samples_<task>_<time>.jsonl`: one line per document, the row
under `doc` and each per-item metric under its own name beside `doc_id`, `target`, `resps`,
`filtered_resps`, `filter` and `metrics` (the list of metric names), as lm-eval's evaluator logs
samples. `read_samples` checks a whole file and turns it into the run to start and one score per
item; `import_samples` starts that run (so the exposure ledger records which endpoint saw the
items), posts the scores, and returns the run's summary with its place on the common scale, over
the API or on the database.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import goldenset_client.models as api

from schemas.runs import ResultIn, ResultsPost, Run, RunCreate
from service.core.db import write_transaction
from service.core.remote import remote_client
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, open_engine

LOCAL_SCOPES = frozenset({"read"})
"""What an import on the database may start: dev runs. A sealed run is started over the API, by a
token with the sealed scope, so the sealed budget and its gate see who asked."""


class SamplesFileError(ValueError):
    """The file is not the samples of one exported goldenset task with the metric as a per-item
    score in [0, 1]; the message names the line and what to do. Nothing was started or posted."""


@dataclass(frozen=True)
class LmEvalScores:
    """One task's samples read: the run they belong to (`eval_name`, `release`, `split`), the
    `metric` read, one score per item id, and the file's SHA-256 (`digest`)."""

    eval_name: str
    release: int
    split: str
    metric: str
    scores: dict[int, float]
    digest: str

    def idempotency_key(self, model: str, endpoint: str) -> str:
        """The same file imported again for the same model and endpoint finds the run it started."""
        return f"lm-eval:{hashlib.sha256(f'{self.digest}:{model}:{endpoint}:{self.metric}'.encode()).hexdigest()[:48]}"


def _row(line_number: int, sample: Any) -> tuple[int, str, int, str]:
    """(item id, eval, release, split) of one sample's `doc`, or `SamplesFileError`."""
    doc = sample.get("doc") if isinstance(sample, dict) else None
    metadata = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not isinstance(metadata, dict):
        raise SamplesFileError(
            f"line {line_number} has no goldenset row under `doc`: import the samples lm-eval logged (`--log_samples`) for a task written by `goldenset export --format lm-eval`"
        )
    item_id, eval_name, release, split = doc.get("id"), metadata.get("eval"), metadata.get("release"), doc.get("split")
    if not (isinstance(item_id, int) and isinstance(eval_name, str) and isinstance(release, int) and isinstance(split, str)):
        raise SamplesFileError(f"line {line_number}: its `doc` lacks the export's `id`, `split`, `metadata.eval` or `metadata.release`; was the task exported by goldenset?")
    return item_id, eval_name, release, split


def _score(line_number: int, sample: dict[str, Any], metric: str) -> float:
    """The sample's `metric` as a score in [0, 1], or `SamplesFileError` saying why not."""
    if metric not in sample:
        named = sample.get("metrics")
        found = ", ".join(named) if isinstance(named, list) and named else "none named"
        raise SamplesFileError(f"line {line_number} has no metric {metric!r} (the sample's metrics: {found}); choose one with --metric")
    value = sample[metric]
    if isinstance(value, list | tuple):
        raise SamplesFileError(
            f"line {line_number}: {metric!r} is a pair lm-eval aggregates over the whole task (as bleu is), not a per-item score; "
            "choose a per-item metric such as exact_match with --metric"
        )
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, int | float) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise SamplesFileError(f"line {line_number}: {metric!r} is {value!r}; goldenset takes per-item scores in [0, 1]")
    return float(value)


def read_samples(path: Path, metric: str = "exact_match") -> LmEvalScores:
    """Read lm-eval's samples file of one exported task: every line's item and `metric`. Raises
    `SamplesFileError` for a line that is not JSON, not a goldenset row, of another eval, release or
    split than the first line, without the metric or with a value outside [0, 1]; an item logged
    twice (once per filter) must have the same score both times."""
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise SamplesFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    scores: dict[int, float] = {}
    first: tuple[str, int, str] | None = None
    for line_number, line in enumerate(content.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SamplesFileError(f"line {line_number} of {path.name} is not JSON ({exc.msg}); give lm-eval's samples_<task>_<time>.jsonl file") from exc
        item_id, eval_name, release, split = _row(line_number, sample)
        if first is None:
            first = (eval_name, release, split)
        elif (eval_name, release, split) != first:
            raise SamplesFileError(
                f"line {line_number} is from {eval_name} release {release} ({split}), line 1 from {first[0]} release {first[1]} ({first[2]}): import one task's samples at a time"
            )
        score = _score(line_number, sample, metric)
        if scores.get(item_id, score) != score:
            raise SamplesFileError(f"item {item_id} is logged twice with different {metric!r} ({scores[item_id]} and {score}), once per filter; keep one filter's lines")
        scores[item_id] = score
    if first is None:
        raise SamplesFileError(f"{path} holds no samples")
    return LmEvalScores(eval_name=first[0], release=first[1], split=first[2], metric=metric, scores=scores, digest=hashlib.sha256(content).hexdigest())


def import_samples(found: LmEvalScores, *, model: str, endpoint: str) -> dict[str, Any]:
    """Start the run of `model` through `endpoint` on the samples' release and split (an import
    repeated with the same file finds the run it started) and post every score; the run's summary
    as JSON-ready data. Over the API when the command line was pointed at one, else on the
    database, where only dev runs are started (`LOCAL_SCOPES`). Refusals end the command as the
    command line's contract says; a refused post leaves the run started and unscored, named."""
    results = [ResultIn(item_id=item_id, score=score) for item_id, score in sorted(found.scores.items())]
    key = found.idempotency_key(model, endpoint)
    with remote_client() as client:
        if client is not None:
            started = client.start_run(found.eval_name, model=model, endpoint=endpoint, release=found.release, split=found.split, idempotency_key=key)
            client.post_results(started.id, [api.ResultIn(item_id=result.item_id, score=result.score) for result in results])
            return client.get_run(started.id).model_dump(mode="json")
    from service.runs.runs import post_results, run_summary, start_run

    engine = open_engine()
    data = RunCreate(model=model, endpoint=endpoint, release=found.release, split=found.split)
    max_age = get_settings().terms_max_age_days
    run = start_run(engine=engine, eval_name=found.eval_name, data=data, actor=CLI_ACTOR, scopes=LOCAL_SCOPES, terms_max_age_days=max_age, idempotency_key=key)
    with write_transaction(engine) as session:
        stored = session.get(Run, run.id)
        assert stored is not None
        for start in range(0, len(results), 10_000):
            post_results(session=session, run=stored, data=ResultsPost(results=results[start : start + 10_000]), actor=CLI_ACTOR)
        return run_summary(session=session, run=stored).model_dump(mode="json")
