import json

import pytest

from ingest.readers import DocumentError, detect_format, iter_csv, iter_json_array, iter_jsonl


def test_jsonl_names_each_bad_line_and_keeps_reading() -> None:
    data = b'{"a": 1}\n\n{"a": 2\n[1, 2]\n{"a": "\xff\xfe"}\n{"a": 3}\n'
    records = list(iter_jsonl(data))
    assert [r.position for r in records] == [1, 3, 4, 5, 6]
    assert [r.value for r in records if r.value is not None] == [{"a": 1}, {"a": 3}]
    reasons = {r.position: r.error.reason for r in records if r.error is not None}
    assert reasons == {3: "malformed_json", 4: "wrong_type", 5: "invalid_utf8"}
    bad_utf8 = next(r for r in records if r.position == 5)
    assert bad_utf8.error is not None and "0xff" in bad_utf8.error.detail and bad_utf8.locator == "line 5"


def test_csv_rows_empty_cells_missing_and_bad_rows_named() -> None:
    data = 'id,date,text\n1,2024-01-01,hello\n2,,world\n3,2024-01-03\n4,2024-01-04,"caf\xe9"\n'.encode("latin-1")
    records = list(iter_csv(data))
    assert records[0].value == {"id": "1", "date": "2024-01-01", "text": "hello"}
    assert records[1].value == {"id": "2", "text": "world"}
    assert records[2].error is not None and records[2].error.reason == "malformed_csv" and records[2].locator == "line 4"
    assert records[3].error is not None and records[3].error.reason == "invalid_utf8"


def test_csv_with_bom_and_quoted_newlines() -> None:
    data = '\ufeffid,text\n1,"two\nlines"\n'.encode()
    records = list(iter_csv(data))
    assert records[0].value == {"id": "1", "text": "two\nlines"}


def test_json_array_at_a_nested_path() -> None:
    data = json.dumps({"meta": {}, "feed": {"items": [{"x": 1}, "oops", {"x": 2}]}}).encode()
    records = list(iter_json_array(data, "feed.items"))
    assert [r.position for r in records] == [0, 1, 2]
    assert records[1].error is not None and records[1].locator == "index 1"


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        (b'{"a": [1,', None, "not valid JSON"),
        (b'{"items": {}}', "items", "expected an array of records at 'items'"),
        (b'{"other": []}', "items", "found nothing"),
        (b"\xff[]", None, "UTF-8"),
    ],
)
def test_unreadable_json_document_is_a_document_error(data: bytes, path: str | None, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        list(iter_json_array(data, path))


def test_format_detection() -> None:
    from pathlib import Path

    assert detect_format(Path("a.jsonl"), None, None) == "jsonl"
    assert detect_format(Path("a.ndjson"), None, None) == "jsonl"
    assert detect_format(Path("a.txt"), "csv", None) == "csv"
    assert detect_format(Path("a.txt"), None, "json") == "json"
    with pytest.raises(DocumentError, match="--format"):
        detect_format(Path("a.txt"), None, None)
    with pytest.raises(DocumentError, match="unknown format"):
        detect_format(Path("a.txt"), "xml", None)
