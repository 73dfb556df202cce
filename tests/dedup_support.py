"""Shared by the dedup tests: the real embedding model, loaded once per test session and memoised
by text (so every backend and test reuses the vectors of texts already encoded), an encoder that
records what it is asked, and real Hadoop reports with planted duplicates."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Sequence
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.dedup.embeddings import Encoder, Vectors
from curation.dedup.readability import unreadable_shares
from ingest.mapping import Mapping, load_mapping
from ingest.readers import iter_jsonl
from schemas.item import Item
from schemas.problem import IngestSummary
from schemas.source import SourceCreate
from service.core.db import write_transaction
from service.core.settings import Settings
from service.dedup.encoder import get_encoder
from service.dedup.runner import run_curation
from service.sources.definitions import create_source, get_source
from service.sources.ingestion import ingest_records

REPO_ROOT = Path(__file__).resolve().parent.parent
REPORTS = REPO_ROOT.parent / "shared" / "data" / "gitbugs_hadoop" / "reports.jsonl"
HADOOP_MAPPING = REPO_ROOT / "examples" / "mappings" / "hadoop_jira.yaml"
KEV_MAPPING = REPO_ROOT / "examples" / "mappings" / "cisa_kev.yaml"


class MemoEncoder:
    """The real model, with every text's vector kept for the rest of the test session."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._vectors: dict[str, Vectors] = {}
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            missing = list(dict.fromkeys(text for text in texts if text not in self._vectors))
            if missing:
                for text, vector in zip(missing, self.inner.encode(missing), strict=True):
                    self._vectors[text] = vector
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.vstack([self._vectors[text] for text in texts]).astype(np.float32)

    def unreadable(self, texts: Sequence[str]) -> list[float | None]:
        return unreadable_shares(self.inner, texts)


class CountingEncoder:
    """Records every text it is asked to encode (and, given `release`, holds each call until it is set)."""

    def __init__(self, inner: Encoder, *, release: threading.Event | None = None) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.texts: list[str] = []
        self.entered = threading.Event()
        self.release = release

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        self.entered.set()
        if self.release is not None:
            self.release.wait(timeout=60)
        return self.inner.encode(texts)


@lru_cache(maxsize=1)
def shared_encoder() -> MemoEncoder:
    """all-MiniLM-L6-v2 from the bundled package, loaded once for the whole test session."""
    return MemoEncoder(get_encoder(Settings()))


def hadoop_reports(count: int) -> list[dict[str, Any]]:
    with REPORTS.open(encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(count), handle, strict=False)]


def planted(reports: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Planted duplicates of reports among the first 60, each dated after its original, and one
    earlier incident arriving late. Keys: exact, near, paraphrase, earlier; each record's `of` names
    its original's id."""
    by_id = {report["id"]: report for report in reports}
    exact = copy.deepcopy(by_id["13395121"])  # S3AInstrumentation ... pending upload, with a log excerpt
    exact.update(id="PLANT-EXACT", created="2021-10-13T13:24:00", of="13395121")
    for old, new in (("21/08/13 12:22:39", "21/10/13 09:01:17"), ("bytesPendingUpload=106716", "bytesPendingUpload=5531"), ("blocksSubmitted=1", "blocksSubmitted=4")):
        exact["description"] = exact["description"].replace(old, new)
    near = copy.deepcopy(by_id["13398683"])  # S3A DeleteOperation to parallelize POSTing of bulk deletes
    near.update(id="PLANT-NEAR", created="2021-10-01T13:38:00", of="13398683")
    near["description"] = near["description"].replace("significantly", "greatly").replace("Proposed", "Suggested")
    paraphrase = {
        "id": "PLANT-PARAPHRASE",
        "of": "13396628",  # Avoid possible class loading deadlock with VerifierNone initialization
        "created": "2021-10-05T10:00:00",
        "title": "Deadlock risk when loading VerifierNone from the static initializer of Verifier",
        "description": PARAPHRASE,
    }
    earlier = copy.deepcopy(by_id["13392716"])  # fs.s3a.acl.default not working after S3A Audit feature added (2021-07-30)
    earlier.update(id="PLANT-EARLIER", created="2021-07-20T09:00:00", of="13392716", resolution=None, resolved=None)
    earlier["description"] = earlier["description"].replace("isn't being passed", "is not passed").replace("ideally", "if possible")
    return {"exact": exact, "near": near, "paraphrase": paraphrase, "earlier": earlier}


PARAPHRASE = (
    "The Verifier base class has a static field VERIFIER_NONE which creates an instance of its subclass VerifierNone. "
    "According to the JLS class initialization rules, a superclass initializer that refers to a subclass can deadlock "
    "when classes are loaded concurrently. At the moment only RpcProgram uses this instance so we are safe, but if more "
    "clients (especially static ones) start to use it we may run into the deadlock. Let's remove the reference before it is too late."
)


def curated_pool(engine: Engine, settings: Settings, encoder: Encoder, count: int = 60) -> dict[str, int]:
    """The first `count` Hadoop reports (at least 60) and every planted duplicate of theirs, in
    source `hadoop`, curated; item ids by external id."""
    reports = hadoop_reports(count)
    ingest(engine, "hadoop", [*reports, *planted(reports).values()])
    run_curation(engine, settings, encoder=encoder)
    with Session(engine) as session:
        return {item.external_id: item.id for item in session.exec(select(Item)) if item.id is not None}


def ingest(engine: Engine, source: str, records: list[dict[str, Any]], mapping: Mapping | Path = HADOOP_MAPPING) -> IngestSummary:
    """Store `records` (JSON objects) into `source`, creating it with `mapping` if new."""
    compiled = load_mapping(mapping) if isinstance(mapping, Path) else mapping
    body = "\n".join(json.dumps(record) for record in records).encode()
    with write_transaction(engine) as session:
        stored = get_source(session=session, name=source)
        if stored is None:
            document = compiled.model_dump(mode="json", exclude_defaults=True)
            stored, _ = create_source(session=session, data=SourceCreate(name=source, kind="push", mapping=document), secret_key="x" * 40, actor="test")
    return ingest_records(units=partial(write_transaction, engine), source=stored, records=list(iter_jsonl(body)), mapping=compiled, actor="test")
