"""The harnesses configure logging for the whole process (Inspect AI sets levels on `httpx` and
`uvicorn.error`, adds a root handler and filters): a test that runs one asks for `logging_restored`
(`pytestmark = pytest.mark.usefixtures("logging_restored")`) and leaves logging as it found it.
Registered by `tests/conftest.py`."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """Every logger's level, handlers, filters and flags put back after the test; loggers it added reset."""
    loggers = [logging.getLogger(), *(logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger))]
    saved = {logger: (logger.level, logger.handlers[:], logger.filters[:], logger.disabled, logger.propagate) for logger in loggers}
    yield
    for logger, (level, handlers, filters, disabled, propagate) in saved.items():
        logger.setLevel(level)
        logger.handlers, logger.filters, logger.disabled, logger.propagate = handlers, filters, disabled, propagate
    for added in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(added, logging.Logger) and added not in saved:
            added.setLevel(logging.NOTSET)
            added.handlers, added.filters = [], []
