"""Shared by the sealed walks (every GET; every write; the web UI's forms): a released eval with a
sealed split, items curated after the release of which some are bound for the sealed slice, runs
with results, a sealed read, a finished probe, and the texts of the sealed items that no visible
item shares (finding one in an answer can only mean a sealed item leaked)."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from datetime import date

import httpx
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.releases.groups import anchor, near_groups
from curation.releases.sealing import is_sealed
from schemas.dedup_questions import DedupQuestion
from schemas.evals import EvalItem
from schemas.item import Item
from schemas.model_registry import Endpoint, Model, TrainsOnInputs
from schemas.probes import Probe, ProbeCreate
from schemas.runs import Run
from schemas.source import Source
from service.core.db import write_transaction
from service.evidence.probe_execution import execute_probe
from service.evidence.probes import prepare_probe
from tests.eval_support import ingest_and_curate, kev_records
from tests.evidence_support import register_model
from tests.run_support import KEY, Released, auth, register, released_eval, token

SEALED_FRACTION = 0.3


@dataclass(frozen=True)
class SealedWorld:
    """The seeded eval `ops`: its first release, the unreleased items bound for its sealed slice,
    and `secrets`, the sealed items' texts (external ids, titles, inputs) no visible item shares."""

    released: Released
    bound: set[int]
    secrets: set[str]

    def leaks(self, text: str) -> list[str]:
        """The secrets found in `text`."""
        return [secret for secret in self.secrets if secret in text]


def sealed_world(engine: Engine, url: str) -> SealedWorld:
    """Seed the database behind the server at `url` (see the module) and return what is sealed."""
    released = released_eval(engine, count=40, sealed_fraction=SEALED_FRACTION)
    ingest_and_curate(engine, "kev", kev_records(since="2024-01-01", until="2024-05-01")[40:50])
    register(engine)
    reader, sealed = auth(token(engine, "read", name="seed-reader")), auth(token(engine, "read", "sealed", name="seed-sealed"))
    dev_run = httpx.post(f"{url}/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no"}, headers=reader, timeout=30).json()
    httpx.post(f"{url}/v1/runs/{dev_run['id']}/results", json={"results": [{"item_id": i["item_id"], "score": 1} for i in dev_run["items"]]}, headers=reader, timeout=30)
    assert httpx.post(f"{url}/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-no", "split": "sealed"}, headers=sealed, timeout=30).status_code == 201
    sealed_read = httpx.get(f"{url}/v1/evals/ops/releases/1/items", params={"split": "sealed"}, headers=sealed, timeout=30)
    assert sealed_read.status_code == 200
    assert httpx.post(f"{url}/v1/evals/ops/runs", json={"model": "m1", "endpoint": "m1-yes"}, headers=reader, timeout=30).status_code == 201
    # A finished completion probe of the eval's dev items (its report and chart hold ids and numbers only).
    register_model(engine, "m-probe", cutoff=date(2024, 3, 1), endpoints={"m-probe-no": TrainsOnInputs.NO})
    prepared = prepare_probe(engine=engine, data=ProbeCreate(eval="ops", model="m-probe", endpoint="m-probe-no"), actor="test", terms_max_age_days=90)
    answer = {"choices": [{"message": {"role": "assistant", "content": "a vulnerability"}, "finish_reason": "stop"}]}
    assert execute_probe(engine, prepared, transport=httpx.MockTransport(lambda _: httpx.Response(200, json=answer))) is not None

    with Session(engine) as session:
        members = set(session.exec(select(EvalItem.item_id)).all())
        items = session.exec(select(Item)).all()
        groups = near_groups(session, [item.id for item in items if item.id is not None])
        recorded = dict(session.exec(select(EvalItem.item_id, EvalItem.split)).all())
        bound = set()
        for item in items:
            if item.id is None or item.id in members:
                continue
            # Near groups are sealed together: a group with released members follows them.
            sides = [recorded[member] for member in groups[item.id] if member in recorded]
            if ("sealed" in sides) if sides else is_sealed(KEY, anchor(groups[item.id]), SEALED_FRACTION):
                bound.add(item.id)
        secret_ids = set(released.sealed) | bound
        assert bound and released.sealed, "the slice must hold both released and bound-for-sealed items"
        # A sealed item's id, input or long title counts as leaked unless a visible item says it too
        # (one KEV description names another CVE; some records share a description).
        visible = "\n".join(json.dumps([item.external_id, item.title, item.input, item.reference, item.meta]) for item in items if item.id not in secret_ids)
        candidates = {text for item in items if item.id in secret_ids for text in (item.external_id, item.input, item.title) if len(text) > 8}
        secrets = {text for text in candidates if text not in visible and json.dumps(text)[1:-1] not in visible}
        assert len(secrets) >= 2 * len(secret_ids)
    ask_about(engine, [*released.sealed[:2], *sorted(bound)[:2]], released.dev[0])
    world = SealedWorld(released=released, bound=bound, secrets=secrets)
    # The check can see a leak: the sealed scope's budgeted read shows the released sealed items' text.
    assert len(world.leaks(sealed_read.text)) >= len(released.sealed)
    return world


def ask_about(engine: Engine, sealed_ids: list[int], dev_id: int) -> None:
    """Open dedup questions pairing sealed and bound-for-sealed items with a dev item, their
    evidence quoting the sealed item's title (as a title difference would)."""
    with write_transaction(engine) as session:
        for item_id in sealed_ids:
            item = session.get(Item, item_id)
            assert item is not None
            evidence = {"stage": "embedding", "features": {"body_cosine": 0.8}, "title_differences": [f"different target: {item.title!r}"]}
            session.add(DedupQuestion(item_id=item_id, other_id=dev_id, p_same=0.5, rules_outcome="unique", evidence=evidence))


def path_values(engine: Engine) -> dict[str, list[str]]:
    """Real values for every path parameter: by parameter name, or by the path prefix a name follows."""
    with Session(engine) as session:
        return {
            "item_id": [str(i) for i in session.exec(select(Item.id)).all()],
            "question_id": [str(i) for i in session.exec(select(DedupQuestion.id)).all()],
            "run_id": [str(i) for i in session.exec(select(Run.id)).all()],
            "probe_id": [str(i) for i in session.exec(select(Probe.id)).all()],
            "/v1/sources/": list(session.exec(select(Source.name)).all()),
            "/v1/models/": list(session.exec(select(Model.name)).all()),
            "/v1/endpoints/": list(session.exec(select(Endpoint.name)).all()),
            "/v1/evals/": ["ops"],
            "/v1/corpora/": ["public-corpus"],
            "ref": ["1", "latest"],
        }


def fill_paths(template: str, values: dict[str, list[str]]) -> list[str]:
    """Every path `template` names with `values` (`path_values`) put in its parameters."""
    names = [part[1:-1] for part in template.split("/") if part.startswith("{")]
    choices = []
    for name in names:
        key = name if name in values else next(prefix for prefix in values if prefix.startswith("/") and template.startswith(prefix))
        choices.append(values[key])
    paths = []
    for combo in itertools.product(*choices):
        path = template
        for name, value in zip(names, combo, strict=True):
            path = path.replace("{" + name + "}", value, 1)
        paths.append(path)
    return paths
