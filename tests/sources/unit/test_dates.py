from datetime import UTC, datetime

import pytest

from ingest.dates import IncidentDateError, parse_incident_date

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EXPECTED = datetime(2021, 9, 30, 17, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        "2021-09-30T17:20:00",  # naive means UTC
        "2021-09-30T17:20:00Z",
        "2021-09-30T19:20:00+02:00",
        "2021-09-30T17:20:00.000+0000",  # Jira REST
        "30/Sep/21 17:20",  # Jira export
        "30/Sep/2021 17:20:00",
        1633022400,  # epoch seconds
        1633022400000,  # epoch milliseconds
        "1633022400",
        "1633022400000",
        1633022400.0,
    ],
)
def test_accepted_spellings_read_as_the_same_instant(value: object) -> None:
    parsed = parse_incident_date(value, now=NOW)
    assert parsed == EXPECTED
    assert parsed.tzinfo is not None and parsed.utcoffset() == UTC.utcoffset(None)


def test_a_date_alone_is_midnight_utc() -> None:
    assert parse_incident_date("2025-08-25", now=NOW) == datetime(2025, 8, 25, tzinfo=UTC)


def test_aware_datetime_is_converted_to_utc() -> None:
    from datetime import timedelta, timezone

    value = datetime(2021, 9, 30, 12, 20, tzinfo=timezone(timedelta(hours=-5)))
    assert parse_incident_date(value, now=NOW) == EXPECTED


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "missing"),
        ("", "missing"),
        ("   ", "missing"),
        (True, "not a date"),
        ("yesterday", "cannot read"),
        ("2021-13-01", "cannot read"),
        ("31/Foo/21 10:00", "cannot read"),
        ([2021, 9, 30], "expected a date"),
        ("2031-01-01", "future"),
        (10**20, "out of range"),
        (12, "before 1980"),
    ],
)
def test_unreadable_dates_are_errors_never_now(value: object, message: str) -> None:
    with pytest.raises(IncidentDateError, match=message):
        parse_incident_date(value, now=NOW)
