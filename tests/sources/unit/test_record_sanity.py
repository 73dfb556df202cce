"""What a record must be to be stored (ingest.sanity) and how record versions order (ingest.versions)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from ingest.connectors.registry import connector_class
from ingest.mapping import CompiledMapping, MappedRecord, MappingError, RecordRejected, parse_mapping
from ingest.readers import iter_json_array, iter_jsonl
from ingest.sanity import DEFUSE_DEPTH, MAX_DEPTH, Unreadable, check_structure, check_values, loads, printable
from ingest.versions import VersionError, canonical_version, is_older

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def _nested(depth: int) -> str:
    """A record whose field `a` holds `depth - 1` more nested objects (the record is level 1)."""
    return '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1)


def test_loads_reads_ordinary_json_exactly_like_json_loads() -> None:
    text = '[{"a": [1, 2.5, "x", null, true]}, {"b": {"c": -3}}]'
    assert loads(text) == json.loads(text)


def test_loads_replaces_only_what_it_cannot_read() -> None:
    deep = "[" * 5000 + "]" * 5000
    document = loads('[{"id": 1}, {"id": 2, "trace": ' + deep + '}, {"id": 3, "n": ' + "7" * 6000 + "}]")
    assert [record["id"] for record in document] == [1, 2, 3]
    assert isinstance(document[2]["n"], Unreadable) and document[2]["n"].reason == "number_too_long"
    level, value = 1, document[1]["trace"]
    while isinstance(value, list):
        level, value = level + 1, value[0]
    assert isinstance(value, Unreadable) and value.reason == "too_deep" and level == DEFUSE_DEPTH - 1


def test_loads_still_refuses_malformed_json() -> None:
    for text in ("[{", "[" * 5000, '{"a": ' + "[" * 3000 + "}"):
        with pytest.raises(json.JSONDecodeError):
            loads(text)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = '[{"s": "' + "[" * 3000 + '", "t": ' + "[" * 1500 + "]" * 1500 + "}]"
    document = loads(text)
    assert document[0]["s"] == "[" * 3000


def test_nesting_is_allowed_up_to_max_depth() -> None:
    check_structure(json.loads(_nested(MAX_DEPTH)))
    with pytest.raises(RecordRejected) as refused:
        check_structure(json.loads(_nested(MAX_DEPTH + 1)))
    assert refused.value.reason == "too_deep" and "'a.a.a" in refused.value.detail


def test_a_record_of_10000_levels_is_refused_without_recursion() -> None:
    records = list(iter_jsonl(_nested(10_000).encode()))
    assert records[0].value is not None
    with pytest.raises(RecordRejected, match="deeper than 64"):
        check_structure(records[0].value)


def test_readers_keep_every_element_when_one_cannot_be_parsed() -> None:
    data = ('[{"id": 1}, ' + _nested(3000) + ', {"id": 3}]').encode()
    values = [record.value for record in iter_json_array(data, None)]
    assert values[0] == {"id": 1} and values[2] == {"id": 3}
    lines = b'{"id": 1}\n' + _nested(3000).encode() + b"\n" + b"[" * 3000 + b'\n{"id": 4}\n'
    read = list(iter_jsonl(lines))
    assert [record.position for record in read] == [1, 2, 3, 4]
    assert read[2].error is not None and read[2].error.reason == "malformed_json"
    assert read[3].value == {"id": 4}


def _mapped(**changes: object) -> MappedRecord:
    fields: dict[str, object] = {"external_id": "E-1", "occurred_at": NOW, "title": "t", "input": "i", "reference": "r"}
    return MappedRecord(**{**fields, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "reason", "path"),
    [
        ({"input": "a\x00b"}, "nul_character", "input"),
        ({"title": "caf\udce9"}, "lone_surrogate", "title"),
        ({"reference": "\ud800"}, "lone_surrogate", "reference"),
        ({"external_id": "E\x00"}, "nul_character", "external_id"),
        ({"identity": "\udfff"}, "lone_surrogate", "identity"),
        ({"tags": ["ok", "b\x00d"]}, "nul_character", "tags.1"),
        ({"metadata": {"x": float("nan")}}, "non_finite_number", "metadata.x"),
        ({"metadata": {"x": [1.0, float("-inf")]}}, "non_finite_number", "metadata.x.1"),
        ({"metadata": {"\ud800": 1}}, "lone_surrogate", "metadata.\ud800 (key)"),
        ({"metadata": {"when": NOW}}, "wrong_type", "metadata.when"),
        ({"metadata": {"n": Unreadable("number_too_long", "is an integer of 5000 digits")}}, "number_too_long", "metadata.n"),
    ],
)
def test_check_values_names_the_field_and_the_reason(changes: dict[str, object], reason: str, path: str) -> None:
    with pytest.raises(RecordRejected) as refused:
        check_values(_mapped(**changes))
    assert refused.value.reason == reason
    assert refused.value.detail.startswith(path)


def test_check_values_accepts_what_json_and_both_databases_store() -> None:
    check_values(_mapped(title="café ☕ 𝄞", metadata={"big": 10**40, "f": 1e308, "neg": -0.0, "ok": [None, True, {"s": "\t\n"}]}, tags=["a"]))


def test_printable_escapes_what_cannot_be_shown() -> None:
    assert printable("a\x00b\ud800c") == "a\\u0000b\\ud800c"
    assert printable("plain é") == "plain é"
    printable("\udfff").encode("utf-8")


@pytest.mark.parametrize(
    ("value", "canonical"),
    [
        (17, "17"),
        ("17", "17"),
        (" 1.50 ", "1.5"),
        (2.5, "2.5"),
        ("1e3", "1000"),
        ("2024-06-01T12:00:00Z", "2024-06-01T12:00:00+00:00"),
        ("2024-06-01T14:00:00+02:00", "2024-06-01T12:00:00+00:00"),
        ("2021-09-30T17:20:00.000+0000", "2021-09-30T17:20:00+00:00"),
        ("30/Sep/21 17:20", "2021-09-30T17:20:00+00:00"),
        ("", None),
        (None, None),
    ],
)
def test_versions_read_as_numbers_or_dates(value: object, canonical: str | None) -> None:
    assert canonical_version(value) == canonical


@pytest.mark.parametrize("value", [True, float("nan"), float("inf"), "1e400", "yesterday", "v2.1", "9" * 70, {"a": 1}, 10**50])
def test_unreadable_versions_are_refused(value: object) -> None:
    with pytest.raises(VersionError):
        canonical_version(value)


def test_versions_order_within_a_kind_and_never_across_kinds() -> None:
    def v(value: object) -> str | None:
        return canonical_version(value)

    assert is_older(v(9), v(10)) and not is_older(v(10), v(9)) and not is_older(v(10), v("10.0"))
    assert is_older(v("9"), v(10))  # numbers as numbers, not as text ("9" > "10" as text)
    assert is_older(v("2024-06-01T13:00:00+02:00"), v("2024-06-01T12:00:00Z"))
    assert not is_older(v("2024-06-01T12:00:00Z"), v("2024-06-01T14:00:00+02:00"))  # the same instant
    assert not is_older(v(1), v("2024-06-01")) and not is_older(v("2024-06-01"), v(1))  # kinds differ
    assert not is_older(None, v(5)) and not is_older(v(5), None)


def test_the_mapping_reads_the_version_from_a_path_or_a_template() -> None:
    by_path = CompiledMapping(parse_mapping({"external_id": "id", "occurred_at": "at", "input": "text", "version": "meta.updated"}))
    record = {"id": "A", "at": "2024-01-01", "text": "x", "meta": {"updated": "2024-02-01T00:00:00Z"}}
    assert by_path.apply(record, now=NOW).version == "2024-02-01T00:00:00+00:00"
    assert by_path.apply({**record, "meta": {}}, now=NOW).version is None
    with pytest.raises(RecordRejected) as refused:
        by_path.apply({**record, "meta": {"updated": "soon"}}, now=NOW)
    assert (refused.value.reason, refused.value.external_id) == ("bad_version", "A")
    by_template = CompiledMapping(parse_mapping({"external_id": "id", "occurred_at": "at", "input": "text", "version": "{{ rev }}"}))
    assert by_template.apply({**record, "rev": 12}, now=NOW).version == "12"
    with pytest.raises(MappingError, match="version"):
        parse_mapping({"version": "{{ broken"})
    with pytest.raises(MappingError, match="version"):
        parse_mapping({"version": " "})


@pytest.mark.parametrize("kind", ["github", "jira", "pagerduty"])
def test_every_connector_maps_its_records_updated_time_as_the_version(kind: str) -> None:
    assert parse_mapping(connector_class(kind).default_mapping).version in {"updated_at", "fields.updated"}
