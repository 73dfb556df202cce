"""The public-inflation report in the service: the eval, the corpus and the model looked up; every
model's per-item scores gathered from the eval's dev runs and the corpus's uploads
(`curation.evidence.item_results`); the reference models chosen; and the arrays handed to
`curation.scale.inflation`, with refusals a person can act on.

Reference models are every other registered model with scores on both the eval (its dev runs) and
the corpus that share items with the target's. Each model's private scores pool all its dev runs of
the eval, whatever the release (an item scored in several runs counts once, with its mean): a
release's items are a sample of the same private eval, and pooling keeps every result.
The items compared are the target's own: its dev items on the eval and its uploaded items on the
corpus, in id order; a reference model not scored on some of them is compared on the rest (warned).
"""

from __future__ import annotations

import numpy as np
from sqlmodel import Session, col, select

from curation.evidence.item_results import ScoresByModel, corpus_scores_by_model, dev_scores_by_model
from curation.scale.inflation import public_inflation_report
from schemas.evidence import PublicInflationReport
from schemas.model_registry import Model
from service.core.problems import ProblemError
from service.evals.definitions import require_eval
from service.evidence.temporal_split import REPORT_SEED, require_corpus
from service.runs.model_registry import require_model


def _matrix(scores: ScoresByModel, models: list[int], items: list[int]) -> np.ndarray:
    """Models × items, NaN where a model has no score on an item."""
    matrix = np.full((len(models), len(items)), np.nan)
    column = {item_id: position for position, item_id in enumerate(items)}
    for row, model_id in enumerate(models):
        for item_id, score in scores[model_id].items():
            if item_id in column:
                matrix[row, column[item_id]] = score
    return matrix


def public_inflation(*, session: Session, eval_name: str, corpus_name: str, model_name: str) -> PublicInflationReport:
    """The public-inflation report of `model_name` on `corpus_name` against the eval `eval_name`.
    Raises ProblemError: 404 (unknown eval, corpus or model; no results of the model on the eval's
    dev runs or on the corpus), 422 (the corpus is a private source; fewer than 2 reference models)."""
    evaluation = require_eval(session=session, name=eval_name)
    corpus = require_corpus(session=session, name=corpus_name)
    model = require_model(session=session, name=model_name)
    assert model.id is not None
    private = dev_scores_by_model(session=session, evaluation=evaluation)
    public = corpus_scores_by_model(session=session, corpus=corpus)
    if not private.get(model.id):
        raise ProblemError(
            404,
            "No results",
            f"no results of model {model_name!r} in any dev run of eval {eval_name!r}; start a dev run with POST /v1/evals/{eval_name}/runs "
            "and post its results with POST /v1/runs/{id}/results (sealed runs never feed this report)",
            reason="no_private_results",
        )
    if not public.get(model.id):
        raise ProblemError(
            404,
            "No results",
            f"no results of model {model_name!r} on corpus {corpus_name!r}; upload them with POST /v1/corpora/{corpus_name}/results",
            reason="no_public_results",
        )
    private_items, public_items = sorted(private[model.id]), sorted(public[model.id])
    names = dict(session.exec(select(Model.id, Model.name).where(col(Model.id).in_(set(private) | set(public)))).all())
    others = sorted((model_id for model_id in set(private) | set(public) if model_id != model.id), key=lambda model_id: names[model_id])
    references: list[int] = []
    eval_only: list[str] = []
    corpus_only: list[str] = []
    no_shared: list[str] = []
    for model_id in others:
        if model_id not in public:
            eval_only.append(names[model_id])
        elif model_id not in private:
            corpus_only.append(names[model_id])
        elif private[model_id].keys().isdisjoint(private_items) or public[model_id].keys().isdisjoint(public_items):
            no_shared.append(names[model_id])
        else:
            references.append(model_id)
    if len(references) < 2:
        found = [names[model_id] for model_id in references]
        detail = _too_few(model_name, eval_name, corpus_name, found, eval_only, corpus_only, no_shared)
        raise ProblemError(
            422, "Too few reference models", detail,
            reason="too_few_reference_models", references=found, eval_only=eval_only, corpus_only=corpus_only, no_shared_items=no_shared,
        )  # fmt: skip
    own_private = np.array([private[model.id][item_id] for item_id in private_items])
    own_public = np.array([public[model.id][item_id] for item_id in public_items])
    return public_inflation_report(
        _matrix(private, references, private_items),
        _matrix(public, references, public_items),
        own_private,
        own_public,
        reference_models=[names[model_id] for model_id in references],
        model=model.name,
        eval_name=evaluation.name,
        corpus=corpus.name,
        rng=np.random.default_rng(REPORT_SEED),
    )


def _too_few(model: str, eval_name: str, corpus: str, references: list[str], eval_only: list[str], corpus_only: list[str], no_shared: list[str]) -> str:
    """What is missing for a line through reference models, and how to supply it."""
    found = f"{len(references)} ({', '.join(references)})" if references else "none"
    parts = [
        f"the report needs at least 2 other models with results on both eval {eval_name!r} (dev runs) and corpus {corpus!r} "
        f"on items {model!r} was scored on, and 5 or more to be trusted; found {found}"
    ]
    if eval_only:
        parts.append(f"results on the eval only: {', '.join(eval_only)} (upload their corpus results with POST /v1/corpora/{corpus}/results)")
    if corpus_only:
        parts.append(f"results on the corpus only: {', '.join(corpus_only)} (run them on the eval's dev split with POST /v1/evals/{eval_name}/runs)")
    if no_shared:
        parts.append(f"no items in common with {model!r}'s: {', '.join(no_shared)} (score them on the same release and corpus items)")
    return "; ".join(parts)
