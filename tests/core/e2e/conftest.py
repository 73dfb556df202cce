"""PostgreSQL databases of their own for the tests that run real goldenset processes over one
database (`tests.processes`): whatever GOLDENSET_TEST_DATABASES says, these fail when PostgreSQL
is unreachable."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine, make_url

from service.core.db import make_engine
from tests.processes import postgres_database


@pytest.fixture(scope="module")
def pg_template() -> Iterator[str]:
    """A migrated PostgreSQL database the module's tests copy (migrating once is much faster)."""
    with postgres_database() as url:
        yield str(make_url(url).database)


@pytest.fixture
def pg_url(pg_template: str) -> Iterator[str]:
    """A migrated PostgreSQL database of the test's own, dropped afterwards."""
    with postgres_database(pg_template) as url:
        yield url


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    engine = make_engine(pg_url)
    yield engine
    engine.dispose()
