from datetime import UTC, datetime
from pathlib import Path

import pytest

from ingest.mapping import NATIVE_MAPPING, CompiledMapping, MappingError, RecordRejected, load_mapping, parse_mapping

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 11, 29, tzinfo=UTC)


def test_shipped_cisa_mapping_maps_a_real_record() -> None:
    mapping = CompiledMapping(load_mapping(ROOT / "examples/mappings/cisa_kev.yaml"))
    record = {
        "cveID": "CVE-2024-8068",
        "vendorProject": "Citrix",
        "product": "Session Recording",
        "vulnerabilityName": "Citrix Session Recording Improper Privilege Management Vulnerability",
        "dateAdded": "2025-08-25",
        "shortDescription": "Citrix Session Recording contains an improper privilege management vulnerability.",
        "requiredAction": "Apply mitigations per vendor instructions.",
        "dueDate": "2025-09-15",
        "knownRansomwareCampaignUse": "Unknown",
        "notes": "https://support.citrix.com/x",
        "cwes": ["CWE-269"],
    }
    mapped = mapping.apply(record, now=NOW)
    assert mapped.external_id == "CVE-2024-8068"
    assert mapped.occurred_at == datetime(2025, 8, 25, tzinfo=UTC)
    assert mapped.input == "Citrix Session Recording: Citrix Session Recording contains an improper privilege management vulnerability."
    assert mapped.reference == "Apply mitigations per vendor instructions."
    assert mapped.tags == ["CWE-269"]
    assert mapped.metadata["dueDate"] == "2025-09-15"
    assert "shortDescription" not in mapped.metadata


def test_shipped_hadoop_mapping_keeps_the_created_date_and_resolution() -> None:
    mapping = CompiledMapping(load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml"))
    mapped = mapping.apply(
        {"id": "13404344", "title": "JAR conflict", "description": "AM errors", "created": "2021-09-30T17:20:00", "resolution": "Duplicate", "resolved": "2022-07-20T20:51:00"},
        now=NOW,
    )
    assert mapped.occurred_at == datetime(2021, 9, 30, 17, 20, tzinfo=UTC)
    assert mapped.input == "JAR conflict\n\nAM errors"
    assert mapped.reference == "Resolution: Duplicate (resolved 2022-07-20T20:51:00)"
    unresolved = mapping.apply({"id": "1", "title": "t", "created": "2021-09-30T17:20:00"}, now=NOW)
    assert unresolved.reference == ""


def test_native_mapping_takes_item_shaped_records() -> None:
    mapped = CompiledMapping(NATIVE_MAPPING).apply(
        {"external_id": 42, "occurred_at": 1633022400, "input": "disk full", "metadata": {"team": "sre"}, "tags": "db, disk"}, now=NOW
    )
    assert (mapped.external_id, mapped.input, mapped.metadata, mapped.tags) == ("42", "disk full", {"team": "sre"}, ["db", "disk"])


def test_dot_paths_and_keys_containing_dots() -> None:
    mapping = CompiledMapping(parse_mapping({"external_id": "key", "occurred_at": "fields.created", "input": "{{ fields.summary }}", "metadata": {"team": "a.b"}}))
    mapped = mapping.apply({"key": "HDP-1", "fields": {"created": "2024-01-01", "summary": "s"}, "a.b": "x"}, now=NOW)
    assert mapped.occurred_at.year == 2024 and mapped.input == "s" and mapped.metadata == {"team": "x"}


@pytest.mark.parametrize(
    ("record", "reason", "fragment"),
    [
        ({"occurred_at": "2024-01-01", "input": "x"}, "missing_field", "'external_id'"),
        ({"external_id": {"a": 1}, "occurred_at": "2024-01-01", "input": "x"}, "wrong_type", "string or integer"),
        ({"external_id": "1", "input": "x"}, "missing_field", "'occurred_at'"),
        ({"external_id": "1", "occurred_at": "soon", "input": "x"}, "bad_date", "cannot read"),
        ({"external_id": "1", "occurred_at": "2024-01-01", "input": "   "}, "empty_input", "rendered empty"),
        ({"external_id": "1", "occurred_at": "2024-01-01", "input": ["a"]}, "wrong_type", "must be text"),
        ({"external_id": "1", "occurred_at": "2024-01-01", "input": "x", "tags": {"a": 1}}, "wrong_type", "tags"),
        ({"external_id": "1", "occurred_at": "2024-01-01", "input": "x", "metadata": [1]}, "wrong_type", "metadata"),
        ({"external_id": "x" * 300, "occurred_at": "2024-01-01", "input": "x"}, "wrong_type", "longer than 255"),
    ],
)
def test_bad_records_are_rejected_with_reason_and_field(record: dict[str, object], reason: str, fragment: str) -> None:
    with pytest.raises(RecordRejected) as caught:
        CompiledMapping(NATIVE_MAPPING).apply(record, now=NOW)
    assert caught.value.reason == reason
    assert fragment in caught.value.detail


def test_required_fields_are_checked() -> None:
    mapping = CompiledMapping(parse_mapping({"input": "{{ a }} {{ b }}", "required": ["b"]}))
    with pytest.raises(RecordRejected, match="required field 'b'") as caught:
        mapping.apply({"external_id": "1", "occurred_at": "2024-01-01", "a": "x"}, now=NOW)
    assert caught.value.external_id == "1"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"input": "{{ unclosed"}, "template does not compile"),
        ({"inptu": "x"}, "inptu: unknown key 'inptu': did you mean 'input'"),
        ({"format": "xml"}, "format"),
        ({"external_id": " "}, "must name a field"),
        ([1, 2], "must be an object"),
    ],
)
def test_invalid_mappings_name_the_field(document: object, message: str) -> None:
    with pytest.raises(MappingError, match=message):
        parse_mapping(document)


def test_mapping_file_that_is_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("input: [unclosed\n")
    with pytest.raises(MappingError, match="not valid YAML"):
        load_mapping(path)
    with pytest.raises(MappingError, match="cannot read"):
        load_mapping(tmp_path / "absent.yaml")


def test_templates_are_sandboxed_and_their_failures_are_record_errors() -> None:
    unsafe = CompiledMapping(parse_mapping({"input": "{{ x.__class__.__mro__ }}"}))
    with pytest.raises(RecordRejected) as caught:
        unsafe.apply({"external_id": "1", "occurred_at": "2024-01-01", "x": "s"}, now=NOW)
    assert caught.value.reason == "empty_input"
    failing = CompiledMapping(parse_mapping({"input": "{{ n / 0 }}"}))
    with pytest.raises(RecordRejected, match="input template failed") as caught:
        failing.apply({"external_id": "1", "occurred_at": "2024-01-01", "n": 1}, now=NOW)
    assert caught.value.reason == "template_error"


def test_record_variable_reaches_keys_that_are_not_identifiers() -> None:
    mapping = CompiledMapping(parse_mapping({"input": "{{ record['Issue Summary'] }}"}))
    assert mapping.apply({"external_id": "1", "occurred_at": "2024-01-01", "Issue Summary": "s"}, now=NOW).input == "s"


def test_records_with_a_self_field_render() -> None:
    # Jira issues carry a `self` URL; in Jinja2 `self` is the template itself, so it is reached as record['self'].
    mapping = CompiledMapping(parse_mapping({"input": "{{ record['self'] }} {{ class }}"}))
    assert mapping.apply({"external_id": "1", "occurred_at": "2024-01-01", "self": "a", "class": "b"}, now=NOW).input == "a b"


def test_a_null_field_renders_as_nothing_in_any_template() -> None:
    """Vendors send `null` for an unset field (Jira's description, PagerDuty's priority): printed,
    joined, concatenated or tested it behaves as a missing field, never as the word `None`."""
    mapping = CompiledMapping(
        parse_mapping(
            {
                "title": "{{ summary }}{{ record['environment'] }}",
                "input": "{{ summary }}\n\n{{ description }}{{ ' / ' ~ component.name }}",
                "reference": "{% if resolution %}Resolved: {{ resolution.name }}{% else %}{{ resolution | default('open') }}{% endif %} {{ labels | join(',') }}",
            }
        )
    )
    record: dict[str, object] = {"external_id": "J-1", "occurred_at": "2024-01-01", "summary": "s", "labels": ["a", None]}
    record.update(dict.fromkeys(("description", "environment", "component", "resolution")))
    mapped = mapping.apply(record, now=NOW)
    assert (mapped.title, mapped.input, mapped.reference) == ("s", "s\n\n /", "open a,")
    assert mapping.apply({**record, "resolution": {"name": "Fixed"}}, now=NOW).reference == "Resolved: Fixed a,"
