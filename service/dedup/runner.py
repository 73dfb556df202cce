"""Running dedup in the service: the single-writer curation run, re-fingerprinting, and the
background trigger after ingest.

Single writer: a run holds the `curation` lock (`service.core.locks.exclusive`: a PostgreSQL advisory
lock, or a file lock beside the SQLite database), so across all processes one `Deduplicator`
decides at a time; a second run gets `CurationBusy` at once instead of waiting.

In-memory indexes: a run keeps its `Deduplicator` (and so its `SimilarityIndex`) between runs, per
engine and encoder, instead of rebuilding it from the database each time. Before each run it
compares a cheap `IndexState` of the database (`curation.dedup.state`) with the state after its
own last run; any difference (another process curated, or ingest changed a decided item) rebuilds
the index, as does a run that raised. The API's `DedupReader` (`service.dedup.reader`) keeps its
own, read-only, index under the same rule.

Backend switches: before a run rebuilds its index, and before a re-fingerprint, fingerprints made
by another backend of the same model (`embedding.backends.same_model`) are checked for equivalence
(`curation.dedup.equivalence`)
and their vectors adopted when they pass; a pair that failed is not checked again by this process.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.dedup.deduplicator import CurationSummary, Deduplicator
from curation.dedup.embeddings import EmbeddingCache, Encoder
from curation.dedup.equivalence import EQUIVALENT_COSINE, EquivalenceCheck, adopt_vectors, check_equivalence, other_model_ids
from curation.dedup.fingerprints import MinHashRecipe
from curation.dedup.index import MixedRecipeError
from curation.dedup.redecide import RedecideSummary, changes, reopen
from curation.dedup.refingerprint import RefingerprintSummary, refingerprint, stale_count
from curation.dedup.rules import DedupConfig
from curation.dedup.state import IndexState, index_state, pending_count
from embedding.backends import backend_of, same_model
from embedding.index_files import IndexFolder
from schemas.common import utcnow
from service.core.db import write_transaction
from service.core.locks import LockBusy, exclusive
from service.core.settings import Settings
from service.core.tracing import annotate, traced
from service.dedup.encoder import get_encoder
from service.dedup.http_backend import admit_encoder

logger = logging.getLogger("goldenset.curation")
LOCK_NAME = "curation"


class CurationBusy(RuntimeError):
    """Another curation run holds the lock (in this process or another): dedup has one writer."""


@dataclass
class _Runner:
    """One engine's curation state in this process: a Deduplicator per (encoder, config, index
    folder), and the equivalence checks that failed, by (stored model id, current model id)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    deduplicators: dict[tuple[int, DedupConfig, str], tuple[Encoder, Deduplicator, IndexState | None]] = field(default_factory=dict)
    refused: dict[tuple[str, str], EquivalenceCheck] = field(default_factory=dict)


@dataclass
class _Switch:
    """What `_adopt_equivalent_vectors` found: the checks whose vectors it adopted, and those
    (made now or remembered) that keep the stored vectors out."""

    adopted: list[EquivalenceCheck] = field(default_factory=list)
    refused: list[EquivalenceCheck] = field(default_factory=list)


_runners: weakref.WeakKeyDictionary[Engine, _Runner] = weakref.WeakKeyDictionary()
_runners_lock = threading.Lock()


def _runner(engine: Engine) -> _Runner:
    with _runners_lock:
        runner = _runners.get(engine)
        if runner is None:
            runner = _runners[engine] = _Runner()
        return runner


@traced("goldenset.curation.run")
def run_curation(
    engine: Engine,
    settings: Settings,
    *,
    encoder: Encoder | None = None,
    limit: int | None = None,
    on_batch: Callable[[CurationSummary], None] | None = None,
) -> CurationSummary:
    """Decide every pending candidate (or `limit` of them), oldest incident first, committing batch by batch.

    Holds the `curation` lock for the whole run and raises `CurationBusy` at once when another
    run (here or in another process) holds it. The model is loaded only when there is something
    to decide. Raises `curation.dedup.index.MixedRecipeError` when stored fingerprints were made with
    another recipe or model, `service.dedup.http_backend.EmbeddingEndpointRefused` (before any text
    is sent) when the `http` backend's endpoint fails the gate, and
    `embedding.http_encoder.EmbeddingServiceError` when its server fails (batches already
    decided stay decided).
    """
    runner = _runner(engine)
    if not runner.lock.acquire(blocking=False):
        raise CurationBusy("a curation run is already going in this process")
    try:
        with exclusive(engine, LOCK_NAME):
            summary = _run_locked(engine, settings, runner, encoder=encoder, limit=limit, on_batch=on_batch)
        annotate(
            decided=summary.decided,
            unique=summary.unique,
            duplicate=summary.duplicate,
            contaminated=summary.contaminated,
            references=summary.references,
            encoded=summary.encoded,
        )
        return summary
    except LockBusy as exc:
        raise CurationBusy("another process is curating this database; its run decides these candidates too") from exc
    finally:
        runner.lock.release()


def _run_locked(
    engine: Engine,
    settings: Settings,
    runner: _Runner,
    *,
    encoder: Encoder | None,
    limit: int | None,
    on_batch: Callable[[CurationSummary], None] | None,
) -> CurationSummary:
    config = settings.dedup_config()
    # Checks and the index rebuild read outside the write transaction: on SQLite that one holds
    # the database's write lock, which ingest is waiting for meanwhile.
    with Session(engine) as reader:
        if pending_count(reader) == 0:
            return CurationSummary()
        encoder = encoder if encoder is not None else get_encoder(settings, engine)
        admit_encoder(reader, settings, encoder)  # before any text leaves the process
        key = (id(encoder), config, settings.ann_folder)
        entry = runner.deduplicators.get(key)
        deduplicator = entry[1] if entry is not None else Deduplicator(encoder=encoder, clock=utcnow, config=config, files=IndexFolder(settings.ann_folder))
        if deduplicator.index is not None and (entry is None or entry[2] != index_state(reader)):
            logger.info("the dedup index is stale (another writer, or a re-ingested item): rebuilding it")
            deduplicator.index = None
        # The encoder is kept beside its Deduplicator so that its id is never reused while cached.
        runner.deduplicators[key] = (encoder, deduplicator, None)
        if deduplicator.index is None:
            switch = _adopt_equivalent_vectors(engine, runner, encoder, deduplicator.recipe)
            if switch.adopted:
                reader.close()  # ends its snapshot: the load below reads a fresh one, holding the adopted vectors
            try:
                deduplicator.load(reader)
            except MixedRecipeError as error:
                if not switch.refused:
                    raise
                raise MixedRecipeError(f"{error}. {_refusal(switch.refused)}") from error
    deduplicator.embeddings.encoded = 0  # `encoded` counts this run only
    try:
        # Encoding happens in read sessions; only each batch's decisions hold the write lock.
        summary = deduplicator.curate_in_steps(lambda: Session(engine), lambda: write_transaction(engine), limit=limit, on_batch=on_batch, ahead=True)
    except BaseException:
        deduplicator.index = None  # half a batch may be in it: rebuild from the database next time
        raise
    summary.encoded = deduplicator.embeddings.encoded
    if deduplicator.holds_stale_entries:
        deduplicator.index = None  # an item changed by a re-ingest during the run was decided again
    with Session(engine) as reader:
        runner.deduplicators[key] = (encoder, deduplicator, index_state(reader))
    if summary.decided or summary.references:
        logger.info(
            "curated %s items: %s unique, %s duplicate, %s contaminated, %s references; %s texts encoded",
            summary.decided,
            summary.unique,
            summary.duplicate,
            summary.contaminated,
            summary.references,
            summary.encoded,
        )
    return summary


def run_refingerprint(
    engine: Engine,
    settings: Settings,
    *,
    encoder: Encoder | None = None,
    on_batch: Callable[[RefingerprintSummary], None] | None = None,
    on_adopt: Callable[[EquivalenceCheck], None] | None = None,
) -> RefingerprintSummary:
    """Bring every stored fingerprint to the current recipe and embedding model (see
    `curation.dedup.refingerprint`), under the `curation` lock; raises `CurationBusy` like `run_curation`.
    Vectors of another backend of the same model that pass the equivalence check are adopted
    first instead of re-encoded (`on_adopt` is told of each adoption), so only what is left
    stale is recomputed. Indexes kept by this process are dropped, so the next run rebuilds them."""
    runner = _runner(engine)
    if not runner.lock.acquire(blocking=False):
        raise CurationBusy("a curation run is already going in this process")
    try:
        with exclusive(engine, LOCK_NAME):
            encoder = encoder if encoder is not None else get_encoder(settings, engine)
            recipe = MinHashRecipe()  # the recipe every Deduplicator here uses
            with Session(engine) as reader:
                if stale_count(reader, recipe=recipe, model_id=encoder.model_id) == 0:
                    return RefingerprintSummary()
                admit_encoder(reader, settings, encoder)
            runner.deduplicators.clear()
            for check in _adopt_equivalent_vectors(engine, runner, encoder, recipe).adopted:
                if on_adopt is not None:
                    on_adopt(check)
            summary = refingerprint(lambda: Session(engine), lambda: write_transaction(engine), recipe=recipe, embeddings=EmbeddingCache(encoder, clock=utcnow), on_batch=on_batch)
    except LockBusy as exc:
        raise CurationBusy("another process is curating this database; re-fingerprint when it is done") from exc
    finally:
        runner.lock.release()
    logger.info("re-fingerprinted %s items; %s texts encoded", summary.items, summary.encoded)
    return summary


def _adopt_equivalent_vectors(engine: Engine, runner: _Runner, encoder: Encoder, recipe: MinHashRecipe) -> _Switch:
    """Check each other backend of `encoder`'s model that fingerprints made with `recipe` name
    (`curation.dedup.equivalence`), unless this process already saw the pair fail, and adopt the
    vectors of those that pass, each in a transaction of its own. Encodes nothing when no such
    fingerprint is stored. Call under the `curation` lock, after `admit_encoder`."""
    switch = _Switch()
    with Session(engine) as reader:
        others = [other for other in other_model_ids(reader, recipe=recipe, model_id=encoder.model_id) if same_model(other, encoder.model_id)]
        checks = []
        for other in others:
            remembered = runner.refused.get((other, encoder.model_id))
            if remembered is not None:
                switch.refused.append(remembered)
            else:
                checks.append(check_equivalence(reader, encoder, other))
    for check in checks:
        if not check.equivalent:
            runner.refused[(check.from_model_id, check.to_model_id)] = check
            switch.refused.append(check)
            logger.info(
                "the vectors stored under %s are not adopted as %s's: min cosine %.5f over %s stored texts (%s needed)",
                check.from_model_id,
                check.to_model_id,
                check.min_cosine,
                check.texts,
                EQUIVALENT_COSINE,
            )
            continue
        with write_transaction(engine) as writer:
            adopt_vectors(writer, check, now=utcnow())
        switch.adopted.append(check)
        logger.info(
            "adopted the vectors stored under %s as %s's: min cosine %.5f (mean %.5f) over %s stored texts",
            check.from_model_id,
            check.to_model_id,
            check.min_cosine,
            check.mean_cosine,
            check.texts,
        )
    return switch


def _refusal(checks: list[EquivalenceCheck]) -> str:
    """Why the stored vectors of another backend were not adopted, and the two ways on."""
    reasons = []
    for check in checks:
        made_by, current = backend_of(check.from_model_id), backend_of(check.to_model_id)
        measured = (
            f"the `{current}` backend's vectors agree with them to a min cosine of {check.min_cosine:.5f} over {check.texts} stored texts, below {EQUIVALENT_COSINE}"
            if check.texts
            else f"no stored text could be compared with the `{current}` backend's vectors"
        )
        reasons.append(
            f"The vectors stored under {check.from_model_id} were made by the `{made_by}` backend and {measured}: "
            f"set GOLDENSET_EMBEDDING_BACKEND={made_by} again to keep using them, or run `goldenset curate --refingerprint` to re-encode them with `{current}`"
        )
    return " ".join(reasons)


def run_redecide(
    engine: Engine,
    settings: Settings,
    *,
    encoder: Encoder | None = None,
    on_batch: Callable[[CurationSummary], None] | None = None,
) -> RedecideSummary:
    """Decide again, under the current rules and thresholds, every item dedup decided and people
    did not (`curation.dedup.redecide`), then whatever else is pending, under the `curation`
    lock; raises `CurationBusy` like `run_curation`. Returns what changed."""
    runner = _runner(engine)
    if not runner.lock.acquire(blocking=False):
        raise CurationBusy("a curation run is already going in this process")
    try:
        with exclusive(engine, LOCK_NAME):
            with Session(engine) as reader:
                admit_encoder(reader, settings, encoder)  # refused before anything is reopened
            with write_transaction(engine) as writer:
                before, kept = reopen(writer)
            runner.deduplicators.clear()  # their indexes hold the reopened items
            _run_locked(engine, settings, runner, encoder=encoder, limit=None, on_batch=on_batch)
            with Session(engine) as reader:
                summary = changes(reader, before, kept)
    except LockBusy as exc:
        raise CurationBusy("another process is curating this database; re-decide when it is done") from exc
    finally:
        runner.lock.release()
    logger.info("re-decided %s items (%s kept as people decided them): %s changed %s", summary.reopened, summary.kept, len(summary.changes), summary.by_kind)
    return summary


class CurationTrigger:
    """Starts a curation run in the background after ingest stored new or changed items.

    At most one run at a time per trigger: when one is already going (here, or in another process
    holding the lock) the request is dropped, and the scheduler's interval job catches up. Never
    encodes on the caller's thread. Disabled when `settings.curate_after_ingest` is false.
    """

    def __init__(self, engine: Engine, settings: Settings, *, encoder: Callable[[], Encoder] | None = None, enabled: bool | None = None) -> None:
        self.engine = engine
        self.settings = settings
        self.encoder = encoder
        self.enabled = settings.curate_after_ingest if enabled is None else enabled
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="curate")
        self._lock = threading.Lock()
        self._future: Future[CurationSummary | None] | None = None

    def request(self) -> bool:
        """Ask for a run; True when one was started."""
        if not self.enabled:
            return False
        with self._lock:
            if self._future is not None and not self._future.done():
                return False
            self._future = self._executor.submit(self._run)
            return True

    def wait(self, timeout: float | None = None) -> CurationSummary | None:
        """Wait for the run last started (for tests and shutdown); None when none ran or it was skipped."""
        future = self._future
        return future.result(timeout=timeout) if future is not None else None

    def _run(self) -> CurationSummary | None:
        try:
            return run_curation(self.engine, self.settings, encoder=self.encoder() if self.encoder is not None else None)
        except CurationBusy as exc:
            logger.info("curation after ingest skipped: %s", exc)
        except Exception:
            logger.exception("curation after ingest failed; the scheduled run will retry")
        return None

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
