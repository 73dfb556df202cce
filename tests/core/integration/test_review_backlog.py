"""The `goldenset_review_backlog_items` gauge agrees with the review queue, on every backend: on an
eval with automatic approval, the items it already took wait for nobody's review and are not
counted; an eval with manual review over the same source counts every unique item. The count
(`curation.review_backlog.waiting_for_review`) is two grouped queries however many evals there are."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.review_backlog import waiting_for_review
from schemas.evals import Eval, EvalCreate
from service.core.db import write_transaction
from service.core.metrics import Metrics
from service.evals.definitions import create_eval
from tests.conftest import TEST_SECRET_KEY
from tests.ui.integration.test_ui_review_count import KEY, RECORDS, TAKEN, _world


def _backlog(engine: Engine) -> dict[str, float]:
    text = Metrics(engine, database_cache_seconds=0).render().decode()
    return {sample.labels["eval"]: sample.value for family in text_string_to_metric_families(text) for sample in family.samples if sample.name == "goldenset_review_backlog_items"}


@contextmanager
def _statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements run on `engine` in the block."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_the_gauge_leaves_out_what_an_automatic_eval_took(engine: Engine) -> None:
    taken, waiting = _world(engine)
    assert len(taken) == TAKEN and len(waiting) == RECORDS - TAKEN
    with Session(engine) as session:
        counted = waiting_for_review(session, session.exec(select(Eval)).all())
    assert counted == {"auto": RECORDS - TAKEN, "manual": RECORDS}
    assert _backlog(engine) == {"auto": RECORDS - TAKEN, "manual": RECORDS}


def test_the_count_is_two_grouped_queries_whatever_the_number_of_evals(engine: Engine) -> None:
    _world(engine)
    with write_transaction(engine) as session:
        for number in range(5):
            data = EvalCreate(name=f"more-{number}", sources=["kev"], approval_policy="auto" if number % 2 else "manual", target_size=TAKEN, max_age_days=None)
            create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=KEY)
    with Session(engine) as session:
        evaluations = session.exec(select(Eval)).all()
        with _statements(engine) as statements:
            counted = waiting_for_review(session, evaluations)
    assert len(statements) == 2, statements
    # The new evals took nothing yet: every unique item waits for their review.
    assert counted == {"auto": RECORDS - TAKEN, "manual": RECORDS, **{f"more-{number}": RECORDS for number in range(5)}}
    with Session(engine) as session, _statements(engine) as statements:
        assert waiting_for_review(session, []) == {} and statements == []
