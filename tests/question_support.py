"""Shared by the dedup questions tests: real Hadoop reports with a planted paraphrase (the words of
a report in reverse order, which the hashing encoder embeds alike while MinHash sees nothing in
common: a `fresh` merge at the `embedding` stage), curated with a judge that answers a fixed P."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.deduplicator import CurationSummary, Deduplicator
from curation.dedup.rules import DedupConfig
from schemas.common import utcnow
from schemas.dedup_questions import DedupQuestion
from schemas.item import Item
from service.core.db import write_session
from tests.dedup_support import hadoop_reports, ingest
from tests.eval_support import HashingEncoder

REPORTS = 50
ORIGINAL = "13396628"
PLANT = "PLANT-REVERSED"
CONFIG = DedupConfig(confirm_threshold=0.6, ask_threshold=0.95)


class FixedJudge:
    """A same-incident judge answering `p` for every pair."""

    def __init__(self, p: float) -> None:
        self.p = p

    def probability(self, features: Mapping[str, float]) -> float:
        return self.p


def reversed_copy(report: dict[str, Any], *, words: str = "", title: str | None = None) -> dict[str, Any]:
    """`report` told again a week later: its title (or `title`) and description with their words in reverse order."""
    plant = copy.deepcopy(report)
    title = title or " ".join(reversed(report["title"].split()))
    description = " ".join(reversed(report["description"].split()))
    plant.update(id=PLANT, created="2021-10-05T10:00:00", title=title, description=f"{description} {words}".strip(), resolution=None, resolved=None)
    return plant


def curate(engine: Engine, p: float | None, config: DedupConfig = CONFIG) -> CurationSummary:
    """Curate what is pending with the hashing encoder and a judge answering `p` (None: no judge)."""
    with write_session(engine) as session:
        summary = Deduplicator(clock=utcnow, encoder=HashingEncoder(), config=config, judge=None if p is None else FixedJudge(p)).curate(session)
        session.commit()
    return summary


def asked_world(engine: Engine, p: float = 0.1, *, title: str | None = None, config: DedupConfig = CONFIG) -> dict[str, int]:
    """The first reports and the reversed copy of one of them (under `title`, if given), curated
    with a judge answering `p`; item ids by external id."""
    reports = hadoop_reports(REPORTS)
    original = next(report for report in reports if report["id"] == ORIGINAL)
    assert ingest(engine, "hadoop", [*reports, reversed_copy(original, title=title)]).rejected == 0
    curate(engine, p, config)
    with Session(engine) as session:
        return {item.external_id: item.id for item in session.exec(select(Item)) if item.id is not None}


def questions(engine: Engine) -> list[DedupQuestion]:
    with Session(engine) as session:
        return list(session.exec(select(DedupQuestion).order_by(col(DedupQuestion.id))))
