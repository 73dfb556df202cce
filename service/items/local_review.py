"""`goldenset review` on the database: the queue served as the API serves it
(`service.evals.sealed_review.serve_queue`, each read audited), neighbours from the dedup index
over stored vectors (the model is loaded, never run on a stored item), decisions and rulings
recorded as the command line (`cli`); the pass itself is `service.items.review_cli.review_pass`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from rich.markup import escape
from rich.panel import Panel
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.index import MixedRecipeError
from curation.dedup.overrides import rule_not_duplicate
from curation.dedup.similarity import nearest_neighbours
from curation.refusals import Refused
from curation.review import decide, undo_review
from schemas.common import utcnow
from schemas.dedup import LowMarginDuplicate
from schemas.evals import Eval
from schemas.item import Item
from schemas.review import Decision, ReviewUndone, SealedReviewWindow
from schemas.source import Source
from service.core.attempts import attempt
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, EXIT_BUDGET, err, fail, out
from service.dedup.reads import low_margin_for_readers
from service.evals.review_queue import QueueFilters
from service.evals.sealed_review import SealedReviewBudgetSpent, Viewer, open_sealed_review_window, serve_queue
from service.items.review_cli import Neighbour, item_panel, review_pass
from service.items.shaping import shape_items

ENDPOINT = "goldenset review"


@dataclass
class LocalDesk:
    """The review's reads and writes on the database, as the command line (`cli`). Neighbours come
    from the dedup index over stored vectors (`deduplicator`; None: not shown)."""

    engine: Engine
    secret_key: str
    deduplicator: Deduplicator | None

    def neighbours(self, item_id: int, count: int) -> list[Neighbour] | None:
        if self.deduplicator is None:
            return None
        with Session(self.engine) as session:
            item = session.get(Item, item_id)
            if item is None:
                return []
            # Sealed neighbours are left out (as the API leaves them out), so more are asked for.
            found = nearest_neighbours(session=session, deduplicator=self.deduplicator, item=item, k=count * 4)
            names = dict(session.exec(select(Source.id, Source.name).where(col(Source.id).in_({other.source_id for _, other in found}))).all())
            shaped = shape_items(session=session, rows=[(other, names.get(other.source_id, "")) for _, other in found], secret_key=self.secret_key)
        visible = {other.id: other for other in shaped if not other.withheld}
        shown = [(similar, visible[other.id]) for similar, other in found if other.id in visible][:count]
        return [Neighbour(id=other.id, score=similar.score, status=other.status, occurred_at=other.occurred_at, title=other.title) for similar, other in shown]

    def decide(self, item_id: int, decision: Decision, reason: str) -> str | None:
        taken = attempt(self.engine, partial(_decide, item_id=item_id, decision=decision, reason=reason))
        return taken.detail if isinstance(taken, Refused) else None

    def undo(self, item_id: int) -> ReviewUndone | str:
        undone = attempt(self.engine, partial(_undo, item_id=item_id))
        return undone.detail if isinstance(undone, Refused) else undone

    def pair(self, doubt: LowMarginDuplicate) -> tuple[Panel, Panel] | None:
        with Session(self.engine) as session:
            item, matched = session.get(Item, doubt.item_id), session.get(Item, doubt.matched_item_id)
            if item is None or matched is None:
                return None
            matched_source = session.get(Source, matched.source_id)
        return item_panel(item, doubt.source), item_panel(matched, matched_source.name if matched_source else "?")

    def rule_not_duplicate(self, item_id: int, note: str) -> str | None:
        ruled = attempt(self.engine, partial(_rule_not_duplicate, item_id=item_id, note=note))
        return ruled.detail if isinstance(ruled, Refused) else None


def _decide(session: Session, *, item_id: int, decision: Decision, reason: str) -> None:
    decide(session=session, item_id=item_id, decision=decision, reason=reason, actor=CLI_ACTOR, now=utcnow())


def _undo(session: Session, *, item_id: int) -> ReviewUndone:
    return undo_review(session=session, item_id=item_id, actor=CLI_ACTOR, now=utcnow())


def _rule_not_duplicate(session: Session, *, item_id: int, note: str) -> None:
    rule_not_duplicate(session=session, item_id=item_id, note=note, actor=CLI_ACTOR, now=utcnow())


def _opened(engine: Engine, evaluation: Eval) -> SealedReviewWindow | SealedReviewBudgetSpent:
    """The command line's window on `evaluation`, opened (or found open) in a unit of work of its
    own; or the spent budget, whose refusal is audited in a unit of work of its own."""
    try:
        return open_sealed_review_window(engine, evaluation=evaluation, token_id=None, actor=CLI_ACTOR, hours=get_settings().sealed_run_read_hours)
    except SealedReviewBudgetSpent as spent:
        return spent


def open_window(engine: Engine, evaluation: Eval) -> SealedReviewWindow:
    """Open (or find open) the command line's sealed review window on `evaluation`, and say so; a
    spent budget ends the command (exit 7)."""
    window = _opened(engine, evaluation)
    if isinstance(window, SealedReviewBudgetSpent):
        raise fail(escape(str(window)), EXIT_BUDGET) from window
    how = "opened now" if window.opened else "already open"
    out.print(
        f"sealed review window on eval {escape(window.eval)} {how}, until {window.until:%Y-%m-%d %H:%M} UTC ({window.used} of its sealed-read budget of "
        f"{window.budget} used since its latest release); every sealed-bound item shown is audited",
        highlight=False,
    )
    return window


def _deduplicator(engine: Engine) -> Deduplicator | None:
    from service.dedup.encoder import get_encoder
    from service.dedup.reader import DedupReader

    settings = get_settings()
    try:
        with err.status("loading the dedup index"):
            encoder = get_encoder(settings, engine)
            reader = DedupReader(settings, encoder=lambda: encoder)
            with Session(engine) as session:
                return reader.deduplicator(session)
    except (MixedRecipeError, OSError) as exc:
        err.print(f"[yellow]neighbours not shown:[/] {escape(str(exc))}", highlight=False)
        return None


def interactive_review(engine: Engine, *, sources: Sequence[str], evaluation: Eval | None, limit: int, neighbours: bool, margin: float, sealed_view: bool = False) -> None:
    """Walk the first `limit` entries of the review queue of `sources` (`evaluation`'s, when given:
    its sealed review window, if `sealed_view` opened one, shows its sealed-bound items), oldest
    incident first, each decision committed at once; then each duplicate of theirs decided with a
    margin under `margin`, closest call first."""
    secret_key = get_settings().secret_key.get_secret_value()
    viewer = Viewer(actor=CLI_ACTOR, token_id=None, may_see_sealed=sealed_view, endpoint=ENDPOINT)
    page = serve_queue(engine, viewer=viewer, sources=sources, secret_key=secret_key, filters=QueueFilters(), limit=limit, offset=0, evaluation=evaluation)
    doubtful: list[LowMarginDuplicate] = []
    if margin > 0:
        with Session(engine) as session:
            doubtful = low_margin_for_readers(session=session, secret_key=secret_key, sources=sources, margin=margin, limit=limit)
    deduplicator = _deduplicator(engine) if neighbours and any(not entry.withheld for entry in page.entries) else None
    review_pass(LocalDesk(engine, secret_key, deduplicator), page, doubtful, names=", ".join(sources), margin=margin)
