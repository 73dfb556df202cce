"""The dedup decision: for every candidate, in incident order, is it new?

Stages, cheapest first: exact (sha256 of the normalised text), near-verbatim (MinHash LSH,
estimated Jaccard), paraphrase (embedding nearest neighbours, which also generate candidates:
real duplicate reports share few words); the rules that decide are `curation.dedup.rules`. The
earliest incident of a cluster represents it; a later one becomes `duplicate` with
`duplicate_of` naming the item it matched; a match with a registered public reference corpus
makes an item `contaminated`. Items whose `distinct_by` identities differ, and pairs a person
ruled apart, are never matched; an item a person ruled a duplicate stays one. Every decision is
stored with its stage, rule, score, margin, matched item and the runner-up scores, so a curator
can see why.

This module is the single writer of dedup state: run one `Deduplicator` per database at a time
(the service holds a lock around it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, or_, update
from sqlmodel import Session, col, select

from curation.clock import Clock
from curation.dedup.batch_writes import BatchWrites
from curation.dedup.embeddings import EmbeddingCache, Encoder, NewEmbedding, Vectors, body_text, store_embeddings, title_text
from curation.dedup.facts import SourceMemory, StoredFacts
from curation.dedup.fingerprints import MinHashRecipe, normalised_tokens, sketch_texts, to_bytes
from curation.dedup.index import IndexedItem, KnownHashes, SimilarityIndex
from curation.dedup.index_files import IndexFiles
from curation.dedup.near_links import NearLinkTo
from curation.dedup.questions import Judge, Pair, Questioner, asked_verdict, judge_for, open_questions_of
from curation.dedup.readability import Unreadable, unreadable_shares
from curation.dedup.rule_evidence import Facts
from curation.dedup.rules import DedupConfig, Verdict, judge
from curation.dedup.sketch_table import identity_digest
from curation.dedup.text_kind import TextKind, text_kind
from ingest.normalisation import NORMALISATION_VERSION, content_hash, dedup_text, normalise_text
from schemas.dedup import DedupStage, ItemFingerprint
from schemas.dedup_questions import DedupQuestion
from schemas.item import Item, ItemStatus

# Statuses a swap may demote: decided by dedup but not yet reviewed or released.
_SWAPPABLE = {ItemStatus.UNIQUE.value, ItemStatus.DUPLICATE.value}


def rehash(item: Item) -> None:
    """Recompute `item.content_hash` when it was made with an older normalisation."""
    if item.hash_recipe != NORMALISATION_VERSION:
        item.content_hash, item.hash_recipe = content_hash(item.title, item.input, item.reference), NORMALISATION_VERSION


@dataclass
class CurationSummary:
    decided: int = 0
    unique: int = 0
    duplicate: int = 0
    contaminated: int = 0
    references: int = 0
    asked: int = 0
    by_stage: dict[str, int] = field(default_factory=dict)
    encoded: int = 0

    def count(self, verdict: Verdict) -> None:
        self.decided += 1
        setattr(self, verdict.status, getattr(self, verdict.status) + 1)
        self.by_stage[verdict.stage] = self.by_stage.get(verdict.stage, 0) + 1


@dataclass
class _Candidate:
    item: Item
    sketch: Any
    body: Vectors | None = None
    title: Vectors | None = None
    body_key: str | None = None
    title_key: str | None = None
    unreadable: Unreadable = field(default_factory=Unreadable)


@dataclass
class _Prepared:
    """A batch ready to decide: candidates with sketches and vectors, and vectors not yet stored."""

    candidates: list[_Candidate]
    embeddings: list[NewEmbedding]


_SHIPPED_JUDGE: Any = object()


class Deduplicator:
    """Decides candidates against an index of everything decided before. `clock` dates what it
    writes; `files` keep a large pool's index between loads (`curation.dedup.index_files`; None:
    built in memory). `judge`: the same-incident judge that makes curation ask a curator about a
    pair (`curation.dedup.questions`); default the shipped one (`judge_for`: none for an encoder of
    another model than it was fitted on), None to let the rules decide alone."""

    def __init__(
        self, *, encoder: Encoder, clock: Clock, config: DedupConfig | None = None, recipe: MinHashRecipe | None = None, judge: Judge | None = _SHIPPED_JUDGE,
        files: IndexFiles | None = None,
    ) -> None:
        self.encoder = encoder
        self.clock = clock
        self.files = files
        self.config = config or DedupConfig()
        self.recipe = recipe or MinHashRecipe()
        self.questioner = Questioner(judge_for(encoder.model_id) if judge is _SHIPPED_JUDGE else judge, self.config, self.recipe)
        self.embeddings = EmbeddingCache(encoder, clock=clock)
        self.memory = SourceMemory(self.embeddings)
        self.index: SimilarityIndex | None = None
        self.holds_stale_entries = False

    def load(self, session: Session) -> SimilarityIndex:
        """(Re)build the index from the database."""
        self.holds_stale_entries = False
        self.index = SimilarityIndex.load(
            session, recipe=self.recipe, model_id=self.encoder.model_id, dim=self.encoder.dim, lsh_threshold=self._lsh_threshold(), ann=self.config.ann, files=self.files
        )
        return self.index

    def facts(self, session: Session) -> StoredFacts:
        """What decisions read of indexed items, through `session`; make one per batch."""
        return StoredFacts(session, self.memory)

    def _lsh_threshold(self) -> float:
        return self.config.lsh_threshold

    def curate(self, session: Session, *, limit: int | None = None, on_batch: Callable[[CurationSummary], None] | None = None) -> CurationSummary:
        """Decide every pending candidate (or `limit` of them), oldest incident first, in batches,
        all in `session`, which the caller commits. Reference-corpus items without fingerprints
        are indexed too."""
        return self.curate_in_steps(lambda: nullcontext(session), lambda: nullcontext(session), limit=limit, on_batch=on_batch)

    def curate_in_steps(
        self,
        read: Callable[[], AbstractContextManager[Session]],
        write: Callable[[], AbstractContextManager[Session]],
        *,
        limit: int | None = None,
        on_batch: Callable[[CurationSummary], None] | None = None,
        ahead: bool = False,
    ) -> CurationSummary:
        """`curate`, with each batch's slow part (sketches and embeddings) done in a `read()`
        session and only the decisions written in a `write()` session, one per batch, whose context
        the caller makes commit when it closes (`service.core.db.write_transaction`), so every
        finished batch stays decided. On SQLite the write session holds the database's write lock,
        which ingest waits for: it is never held while the model encodes. An item changed between
        the two steps is left pending for the next batch.

        With `ahead` (and no `limit`), the next batch is prepared in a thread while one is decided,
        so the model encodes while decisions are written; `read()` must then give sessions of their
        own (not the `write()` one). The decisions are the same either way: the next batch takes
        the pending items after the one being decided, and a text that batch left for an exact
        copy to share, whose copy was then not indexed, is encoded when it is decided."""
        if self.index is None:
            with read() as reader:
                self.load(reader)
        summary = CurationSummary()
        encoded_before = self.embeddings.encoded
        ahead = ahead and limit is None

        def prepare(size: int, seen: KnownHashes, exclude: list[int]) -> _Prepared:
            with read() as reader:
                return self._prepare(reader, self._pending(reader, size, exclude=exclude), seen)

        def known_hashes() -> KnownHashes:
            assert self.index is not None
            return self.index.known_hashes()  # a copy: the index changes while the next batch is prepared

        with ThreadPoolExecutor(1, thread_name_prefix="curation-ahead") if ahead else nullcontext() as pool:
            upcoming: Future[_Prepared] | None = None
            while limit is None or summary.decided + summary.references < limit:
                size = self.config.batch_size if limit is None else min(self.config.batch_size, limit - summary.decided - summary.references)
                prepared = upcoming.result() if upcoming is not None else prepare(size, known_hashes(), [])
                upcoming = None
                if not prepared.candidates:
                    break
                if pool is not None:
                    seen = known_hashes()
                    seen.update(candidate.item.content_hash for candidate in prepared.candidates)
                    upcoming = pool.submit(prepare, size, seen, [candidate.item.id for candidate in prepared.candidates if candidate.item.id is not None])
                with write() as writer:
                    self._decide_prepared(writer, prepared, summary)
                    writer.flush()
                summary.encoded = self.embeddings.encoded - encoded_before
                if on_batch is not None:
                    on_batch(summary)
        return summary

    def _pending(self, session: Session, size: int, *, exclude: Sequence[int] = ()) -> list[Item]:
        fingerprinted = select(ItemFingerprint.item_id)
        pending = or_(col(Item.status) == ItemStatus.CANDIDATE.value, and_(col(Item.status) == ItemStatus.REFERENCE.value, col(Item.id).not_in(fingerprinted)))
        query = select(Item).where(pending).order_by(col(Item.occurred_at), col(Item.id)).limit(size)
        if exclude:
            query = query.where(col(Item.id).not_in(exclude))
        return list(session.exec(query))

    def _prepare(self, session: Session, batch: list[Item], seen_hashes: KnownHashes) -> _Prepared:
        """Sketches and embeddings of a batch (no writes: new vectors are returned, not added).
        `seen_hashes`: the content hashes already indexed (or about to be), whose copies are not
        embedded; this adds the batch's own."""
        for item in batch:
            rehash(item)
        sketches = sketch_texts((dedup_text(item.title, item.input) for item in batch), self.recipe)
        candidates = [_Candidate(item, sketch) for item, sketch in zip(batch, sketches, strict=True)]
        # Exact duplicates (of indexed items or of an earlier candidate in this batch) are never embedded.
        to_embed: list[_Candidate] = []
        for candidate in candidates:
            if candidate.item.content_hash not in seen_hashes or candidate.item.status == ItemStatus.REFERENCE.value:
                to_embed.append(candidate)
            seen_hashes.add(candidate.item.content_hash)
        fresh = self._embed(session, to_embed)
        for candidate in candidates:
            session.expunge(candidate.item)
        return _Prepared(candidates, fresh)

    def _embed(self, session: Session, candidates: list[_Candidate]) -> list[NewEmbedding]:
        """Give `candidates` their body and title vectors; the rows of those just encoded."""
        if not candidates:
            return []
        texts = [body_text(c.item.title, c.item.input) for c in candidates] + [title_text(c.item.title, c.item.input) for c in candidates]
        found = self.embeddings.read(session, texts)
        keys, vectors, shares = found.keys, found.vectors, found.unreadable
        half = len(candidates)
        for position, candidate in enumerate(candidates):
            candidate.body, candidate.title = vectors[position], vectors[half + position]
            candidate.body_key, candidate.title_key = keys[position], keys[half + position]
            candidate.unreadable = Unreadable(shares[position], shares[half + position])
        return found.fresh

    def _decide_prepared(self, session: Session, prepared: _Prepared, summary: CurationSummary) -> None:
        assert self.index is not None
        # A text prepared to share an exact copy's vectors, whose copy was not indexed after all
        # (prepared ahead of a batch that left it pending), is encoded now.
        in_batch: set[str] = set()
        orphans = []
        for candidate in prepared.candidates:
            hashed = candidate.item.content_hash
            if candidate.body is None and not self.index.has_hash(hashed) and hashed not in in_batch:
                orphans.append(candidate)
            in_batch.add(hashed)
        # Vectors the batch decided before this one stored meanwhile are skipped.
        store_embeddings(session, [*prepared.embeddings, *self._embed(session, orphans)], skip_stored=True)
        ids = [candidate.item.id for candidate in prepared.candidates]
        current = {item.id: item for item in session.exec(select(Item).where(col(Item.id).in_(ids)))}
        # Fingerprints of items decided before (a changed item decided again) are updated in place.
        writes = BatchWrites({fingerprint.item_id: fingerprint for fingerprint in session.exec(select(ItemFingerprint).where(col(ItemFingerprint.item_id).in_(ids)))}, self.clock)
        facts = self.facts(session)
        questions = open_questions_of(session, [item_id for item_id in ids if item_id is not None])
        with session.no_autoflush:  # one flush at commit, not one per row (`_swap` flushes before its update)
            for candidate in prepared.candidates:
                item = current.get(candidate.item.id)
                if item is None or (item.revision, item.status) != (candidate.item.revision, candidate.item.status):
                    continue  # changed or removed meanwhile: decided again from its new state
                item.content_hash, item.hash_recipe = candidate.item.content_hash, candidate.item.hash_recipe
                candidate.item = item
                self._settle(session, candidate, summary, writes, facts, questions)
        writes.insert(session)

    def _settle(self, session: Session, candidate: _Candidate, summary: CurationSummary, writes: BatchWrites, facts: StoredFacts, questions: dict[int, DedupQuestion]) -> None:
        index = self.index
        assert index is not None
        item = candidate.item
        assert item.id is not None
        if item.status == ItemStatus.REFERENCE.value:
            self._fingerprint(session, candidate, writes)
            self._index(candidate, root=item.id, status=item.status)
            summary.references += 1
            return
        # A changed item re-curated by a long-lived index must not match its own earlier entry,
        # and that entry (its old text) stays in the index: the index must be rebuilt after this run.
        self.holds_stale_entries |= item.id in index
        ruled = facts.ruled_duplicate_of(item.id)
        if ruled is not None:
            status = ItemStatus.CONTAMINATED.value if self._is_reference(ruled) else ItemStatus.DUPLICATE.value
            ruling = (NearLinkTo(ruled, DedupStage.OVERRIDE.value, None),)
            verdict = Verdict(status, DedupStage.OVERRIDE.value, None, ruled, {"rule": "override", "matched_item": ruled}, ruling)
        else:
            verdict = self.judge(item, candidate.sketch, candidate.body, candidate.title, facts=facts, exclude=(item.id,), unreadable=candidate.unreadable)
        if candidate.body is None:
            # A text whose normalised form is already indexed is never embedded: it shares the
            # vectors of the item it copies (the same text up to masked tokens), so it can still be
            # found as a neighbour, also when the rules kept it apart (another version number).
            copies = [verdict.details["matched_item"]] if verdict.stage == DedupStage.EXACT.value else [other for other in index.exact(item.content_hash) if other != item.id]
            if copies:
                copied = index.get(copies[0])
                candidate.body, candidate.title = index.vectors(copied.item_id)
                candidate.body_key, candidate.title_key = copied.body_key, copied.title_key
        self._fingerprint(session, candidate, writes)
        asked = None
        if self.questioner.asks:
            pair = Pair(item, candidate.body, candidate.title, candidate.unreadable, TextKind(verdict.details.get("text", TextKind.LONG.value)))
            asked = self.questioner.consider(pair, verdict, index=index, facts=facts, session=session)
        self.questioner.record(session, item.id, asked, questions, now=self.clock())
        if asked is not None:
            verdict = asked_verdict(verdict, asked)
            summary.asked += 1
        if verdict.status == ItemStatus.UNIQUE.value:
            item.status, item.duplicate_of = verdict.status, None
        elif verdict.rule == "fresh" and self._is_later(verdict.matched, item) and self._swap(session, item, verdict, writes):
            verdict = Verdict(ItemStatus.UNIQUE.value, DedupStage.NONE.value, details={**verdict.details, "kept_over": verdict.matched}, links=verdict.links)
            item.status, item.duplicate_of = verdict.status, None
        else:
            item.status, item.duplicate_of = verdict.status, verdict.matched
        session.add(item)
        writes.decide(item.id, verdict)
        writes.link(item.id, verdict.links)
        if candidate.body is not None and candidate.body_key is not None:
            self._index(candidate, root=item.duplicate_of or item.id, status=item.status)
        summary.count(verdict)

    def _fingerprint(self, session: Session, candidate: _Candidate, writes: BatchWrites) -> None:
        item_id = candidate.item.id
        assert item_id is not None
        values = {
            "recipe": self.recipe.key,
            "minhash": to_bytes(candidate.sketch),
            "model_id": self.encoder.model_id if candidate.body_key else None,
            "body_key": candidate.body_key,
            "title_key": candidate.title_key,
        }
        stored = writes.stored_fingerprints.get(item_id)
        if stored is None:
            writes.new_fingerprints[item_id] = {"item_id": item_id, **values, "created_at": self.clock()}
            return
        for name, value in values.items():
            setattr(stored, name, value)
        session.add(stored)

    def _index(self, candidate: _Candidate, *, root: int, status: str) -> None:
        assert self.index is not None and candidate.item.id is not None and candidate.body is not None and candidate.title is not None
        item = candidate.item
        identity = identity_digest(item.identity_key)
        entry = IndexedItem(candidate.item.id, item.occurred_at.timestamp(), item.content_hash, identity, root, status, candidate.body_key, candidate.title_key)
        self.index.add([(entry, candidate.sketch, candidate.body, candidate.title)])

    def _is_reference(self, item_id: int) -> bool:
        """Whether an indexed item is a public reference item, or a duplicate of one."""
        assert self.index is not None
        if item_id not in self.index:
            return False
        entry = self.index.get(item_id)
        root = self.index.get(entry.root) if entry.root in self.index else entry
        return ItemStatus.REFERENCE.value in (entry.status, root.status)

    def _is_later(self, matched: int | None, item: Item) -> bool:
        assert self.index is not None
        return matched is not None and matched in self.index and self.index.get(matched).occurred_at > item.occurred_at.timestamp()

    def _swap(self, session: Session, item: Item, verdict: Verdict, writes: BatchWrites) -> bool:
        """`item` happened before the representative it matches: it becomes the representative, and
        that one its duplicate, unless it was already reviewed or released (then `item` stays the
        duplicate). The duplicates that matched the old representative keep naming it."""
        assert self.index is not None and item.id is not None and verdict.matched is not None
        matched = self.index.get(verdict.matched)
        if matched.status not in _SWAPPABLE or matched.root != matched.item_id:
            return False
        session.flush()  # decisions earlier in the batch are in the database before it is updated
        session.exec(update(Item).where(col(Item.id) == matched.item_id).values(status=ItemStatus.DUPLICATE.value, duplicate_of=item.id))
        swap_details = {"earlier_incident_arrived": item.id, "rule": "fresh"}
        writes.decide(matched.item_id, verdict, status=ItemStatus.DUPLICATE.value, matched=item.id, details=swap_details)
        self.index.set_root(matched.item_id, item.id, ItemStatus.DUPLICATE.value)
        return True

    def judge(
        self, item: Item, sketch: Any, body: Vectors | None, title: Vectors | None, *, facts: Facts, exclude: Sequence[int] = (), unreadable: Unreadable | None = None
    ) -> Verdict:
        """The verdict on one text against the index (no writes; `curation.dedup.rules`).
        `unreadable`: the shares of its body and title texts the model cannot read."""
        index = self.index
        assert index is not None
        kind = self.text_kind_of(item.title, item.input)
        details: dict[str, Any] = {"recipe": self.recipe.key, "model": self.encoder.model_id, "text": kind.value}
        return judge(item, sketch, body, title, index=index, kind=kind, config=self.config, facts=facts, details=details, exclude=exclude, unreadable=unreadable)

    def text_kind_of(self, title: str, input_text: str) -> TextKind:
        """The kind of an item's text (`curation.dedup.text_kind`), which picks the rules and thresholds."""
        text = dedup_text(title, input_text)
        normalised = normalise_text(text)
        return text_kind(text, normalised, len(normalised_tokens(normalised)), short_tokens=self.recipe.short_tokens)

    def unreadable_of(self, title: str, input_text: str) -> Unreadable:
        """The shares of a text's body and title the model cannot read (measured now, not stored)."""
        body, title_share = unreadable_shares(self.encoder, [body_text(title, input_text), title_text(title, input_text)])
        return Unreadable(body, title_share)

    def embed_one(self, title: str, input_text: str) -> tuple[Vectors, Vectors]:
        """Body and title vectors of a text, encoded now and not stored (for checks)."""
        vectors = self.encoder.encode([body_text(title, input_text), title_text(title, input_text)])
        return vectors[0], vectors[1]
