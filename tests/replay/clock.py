"""A virtual clock for pulls: it moves only when something sleeps on it, and records every sleep."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta


class VirtualTime:
    """A clock that only moves when something sleeps on it; every sleep is recorded, none is real."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def epoch(self) -> float:
        return self.now().timestamp()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self._now += timedelta(seconds=seconds)
