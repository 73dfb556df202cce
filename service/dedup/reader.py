"""The dedup index behind the read API (`/v1/items/{id}/similar`, `/v1/dedup/check`) and the review
command: read-only, rebuilt whenever curation has moved on."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.embeddings import Encoder
from curation.dedup.state import IndexState, index_state
from embedding.index_files import IndexFolder
from schemas.common import utcnow
from service.core.settings import Settings

logger = logging.getLogger(__name__)
PAGE_STATE_SECONDS = 5.0
"""Pages trust the index for this long before checking whether curation has moved on."""


class DedupReader:
    """A read-only dedup index for the API (`/v1/items/{id}/similar`, `/v1/dedup/check`).

    `deduplicator(session)` returns a `Deduplicator` whose index holds every decided item. The
    index is rebuilt from the database, under a lock, whenever `index_state` differs from the state
    it was built at (new decisions or fingerprints, or items sent back to candidate), so answers
    reflect the newest curation run at the cost of three cheap queries per request. A rebuild
    makes a new Deduplicator and swaps it in whole: requests already holding the old one finish
    on it undisturbed, and nothing ever writes through it. It never decides or stores anything.
    """

    def __init__(self, settings: Settings, *, encoder: Callable[[], Encoder], can_encode: bool = True) -> None:
        self.settings = settings
        self._encoder = encoder
        # False in an API replica: `encoder()` then only names the model (its stored vectors are
        # read, never made), so nothing that embeds a new text may use this index.
        self.can_encode = can_encode
        self._lock = threading.Lock()
        self._current: tuple[Deduplicator, IndexState] | None = None
        self._checked_at = float("-inf")

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
            deduplicator = Deduplicator(encoder=self.encoder(), clock=utcnow, config=self.settings.dedup_config(), files=IndexFolder(self.settings.ann_folder))
            deduplicator.load(session)
            self._current = (deduplicator, state)
            return deduplicator

    def without_waiting(self, engine: Engine) -> Deduplicator | None:
        """The newest index built so far, without waiting for a build: when curation has moved on
        since (or nothing is built yet), a rebuild starts in the background and the older index (or
        None) is returned. Whether curation moved on is checked at most every PAGE_STATE_SECONDS.
        For pages, which must never wait for the model to load or the index to be read."""
        current = self._current
        now = time.monotonic()
        if current is not None and now - self._checked_at < PAGE_STATE_SECONDS:
            return current[0]
        with Session(engine) as session:
            state = index_state(session)
        self._checked_at = now
        if current is not None and current[1] == state:
            return current[0]
        if not self._lock.locked():
            threading.Thread(target=self._build, args=(engine,), name="dedup-index", daemon=True).start()
        return current[0] if current is not None else None

    def _build(self, engine: Engine) -> None:
        try:
            with Session(engine) as session:
                self.deduplicator(session)
        except Exception:  # a page shows no neighbours rather than fail; the API reports the cause
            logger.exception("building the dedup index for pages failed")
