"""What `goldenset token create --expires-in/--expires` accept, and what they refuse."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.core.tokens import format_expiry, parse_expiry

NOW = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)


def test_no_expiry_means_never() -> None:
    assert parse_expiry(now=NOW) is None
    assert format_expiry(None) == "never"


@pytest.mark.parametrize(("text", "delta"), [("90d", timedelta(days=90)), ("12h", timedelta(hours=12)), (" 1D ", timedelta(days=1)), ("36H", timedelta(hours=36))])
def test_durations_count_from_now(text: str, delta: timedelta) -> None:
    assert parse_expiry(expires_in=text, now=NOW) == NOW + delta


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2027-03-01", datetime(2027, 3, 1, tzinfo=UTC)),  # a date alone: its midnight UTC
        ("2027-03-01T12:30", datetime(2027, 3, 1, 12, 30, tzinfo=UTC)),  # no zone: UTC
        ("2027-03-01T12:30:00+02:00", datetime(2027, 3, 1, 10, 30, tzinfo=UTC)),
        ("2027-03-01T12:30:00Z", datetime(2027, 3, 1, 12, 30, tzinfo=UTC)),
    ],
)
def test_dates_and_date_times_are_read_as_utc(text: str, expected: datetime) -> None:
    moment = parse_expiry(expires=text, now=NOW)
    assert moment == expected and moment is not None and moment.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"expires": "2020-01-01"}, "2020-01-01 00:00 UTC is not in the future"),
        ({"expires": "2026-11-30T21:59:59Z"}, "not in the future"),
        ({"expires_in": "0d"}, "not in the future"),
        ({"expires_in": "0h"}, "not in the future"),
        ({"expires_in": "-5d"}, "not a duration"),
        ({"expires_in": "90"}, "not a duration"),
        ({"expires_in": "2w"}, "not a duration"),
        ({"expires_in": "1.5d"}, "not a duration"),
        ({"expires_in": "99999999999d"}, "shorter duration"),
        ({"expires": "next tuesday"}, "not an ISO 8601 date"),
        ({"expires": "2027-02-30"}, "not an ISO 8601 date"),
        ({"expires_in": "90d", "expires": "2027-03-01"}, "not both"),
    ],
)
def test_unreadable_past_or_doubled_expiries_are_refused_with_what_to_give(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_expiry(now=NOW, **kwargs)


def test_an_expiry_is_shown_in_utc() -> None:
    assert format_expiry(datetime(2027, 3, 1, 2, 0, tzinfo=UTC) + timedelta(hours=-3)) == "2027-02-28 23:00 UTC"
