"""How the eval commands read the options people type: refresh times, dates and source quotas.
A value that does not parse ends the command with exit status 2, naming the option and an example."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from service.core.terminal import fail


def parse_at(text: str) -> datetime:
    """A refresh time: ISO 8601; without a zone it is UTC; a bare date means the end of that day
    (so `--at 2024-03-01` is the period holding 1 March, its 03:00 tick included)."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1, microseconds=-1)
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise fail(f"--at {text!r} is not a date or an ISO 8601 time (e.g. 2024-03-01 or 2024-03-01T03:00:00Z)") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def start_of(text: str) -> datetime:
    """A date (its start, UTC) or an ISO 8601 time (no zone: UTC)."""
    if len(text) == 10:
        return parse_at(text) - timedelta(days=1, microseconds=-1)
    return parse_at(text)


def quotas(values: list[str]) -> dict[str, int]:
    """`--quota SOURCE=N` options as a mapping of source to N."""
    quotas: dict[str, int] = {}
    for value in values:
        name, _, number = value.partition("=")
        if not name or not number.isdigit():
            raise fail(f"--quota {value!r} must look like SOURCE=N")
        quotas[name] = int(number)
    return quotas
