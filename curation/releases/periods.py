"""Refresh periods: an eval's schedule (a crontab expression, UTC) cuts time into periods, each
starting at a tick and ending at the next. A refresh at any moment belongs to the period of the
most recent tick at or before it, so every refresh within a period means the same release.

Day-of-week numbers follow cron (0 and 7 are Sunday); APScheduler's `CronTrigger` counts from
Monday, so numbers are translated to day names before it sees them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from apscheduler.triggers.cron import CronTrigger

_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")
# How far back to look for the latest tick, widening until one is found (a schedule may tick once a year).
_LOOKBACK = (timedelta(minutes=2), timedelta(hours=2), timedelta(days=2), timedelta(days=33), timedelta(days=367), timedelta(days=366 * 8 + 2))


@dataclass(frozen=True)
class Period:
    """[start, end): the ticks of the schedule that begin this period and the next."""

    start: datetime
    end: datetime


def _day_of_week(field: str) -> str:
    if field == "*" or not re.search(r"\d", field):
        return field
    if "/" in field:
        raise ValueError(f"day-of-week {field!r}: write steps over day names (e.g. mon-fri) instead of numbers")

    def name(match: re.Match[str]) -> str:
        number = int(match.group(0))
        if number > 7:
            raise ValueError(f"day-of-week {number} is not 0-7")
        return _DAY_NAMES[number]

    return re.sub(r"\d+", name, field)


def cron_trigger(schedule: str) -> CronTrigger:
    """A UTC `CronTrigger` for a five-field crontab expression; ValueError naming the problem otherwise."""
    fields = schedule.split()
    if len(fields) != 5:
        raise ValueError(f"schedule {schedule!r} must have five fields: minute hour day-of-month month day-of-week (e.g. '0 3 1 * *')")
    minute, hour, day, month, day_of_week = fields
    try:
        return CronTrigger(minute=minute, hour=hour, day=day, month=month, day_of_week=_day_of_week(day_of_week), timezone=UTC)
    except ValueError as exc:
        raise ValueError(f"schedule {schedule!r} is not a valid crontab expression: {exc}") from exc


def next_tick(trigger: CronTrigger, after: datetime) -> datetime:
    """The first tick strictly after `after`."""
    tick: datetime | None = trigger.get_next_fire_time(None, after + timedelta(microseconds=1))
    if tick is None:
        raise ValueError("the schedule never fires again")
    return tick.astimezone(UTC)


def period_at(schedule: str, at: datetime) -> Period:
    """The period holding `at`: from the most recent tick at or before it to the tick after.

    Raises ValueError when `at` is naive or the schedule has no tick in the eight years before it."""
    if at.tzinfo is None:
        raise ValueError("the time of a refresh must be tz-aware")
    at = at.astimezone(UTC)
    trigger = cron_trigger(schedule)
    for lookback in _LOOKBACK:
        tick: datetime | None = trigger.get_next_fire_time(None, at - lookback)
        if tick is None or tick > at:
            continue
        start = tick.astimezone(UTC)
        while (following := next_tick(trigger, start)) <= at:
            start = following
        return Period(start=start, end=following)
    raise ValueError(f"schedule {schedule!r} has no tick in the eight years before {at.isoformat()}")
