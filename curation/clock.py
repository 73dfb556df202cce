"""The clock curation is handed: curation never reads the time itself, so every decision, ruling
and record it dates takes the time from its caller (the service hands `schemas.common.utcnow`;
a test can hand a fixed or stepping one).

`Clock` is what a long piece of work is handed (it dates each batch as it closes); a single
decision takes `now`, a tz-aware UTC datetime. `Timer` measures how long something took, in
seconds (the service hands `time.perf_counter`); `EpochClock` gives the seconds since the epoch
that an HTTP rate-limit reset is compared with (the service hands `time.time`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

Clock = Callable[[], datetime]
Timer = Callable[[], float]
EpochClock = Callable[[], float]
