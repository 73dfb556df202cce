"""Running a coroutine from a synchronous test, whatever else the test process has started."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """`coroutine`'s result, run to the end in a new event loop on a thread of its own: the
    browser tests' Playwright leaves an event loop running on the main thread, where
    `asyncio.run` refuses to start another."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
