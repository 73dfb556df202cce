"""The harnesses configure logging for the whole process (Inspect AI sets levels on `httpx` and
`uvicorn.error`, adds a root handler and filters): each test here leaves logging as it found it."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
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
