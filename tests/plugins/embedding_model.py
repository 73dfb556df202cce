"""The real embedding model as a fixture, `encoder`, for the tests that curate with it (registered
by `tests/conftest.py`)."""

from __future__ import annotations

import pytest

from tests.dedup_support import MemoEncoder, shared_encoder


@pytest.fixture(scope="session")
def encoder() -> MemoEncoder:
    """The real embedding model, loaded once per test session (memoised by text)."""
    return shared_encoder()
