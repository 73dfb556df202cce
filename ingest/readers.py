"""Readers for JSONL, CSV and JSON documents: yield each record with its position, or why it is bad.

A bad line never stops a file: it becomes a `RawRecord` carrying a `RecordRejected` error, and
reading goes on. Only a document that cannot be read at all (a JSON document that does not
parse, a missing array) raises `DocumentError`. JSON is read with `ingest.sanity.loads`, so one
element nested too deeply or holding an unreadably long integer costs that element only: it is
read with a marker in place of the bad value, and the store rejects it by position.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ingest.mapping import RecordRejected, is_missing, resolve_path
from ingest.sanity import Unreadable, loads

Format = Literal["jsonl", "csv", "json"]
FORMATS: tuple[Format, ...] = ("jsonl", "csv", "json")
_EXTENSIONS: dict[str, Format] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".json": "json"}


class DocumentError(ValueError):
    """The document as a whole cannot be read; nothing in it was ingested."""


@dataclass(frozen=True)
class RawRecord:
    """One record as read. Exactly one of `value` and `error` is set."""

    position: int
    locator: str
    value: dict[str, object] | None = None
    error: RecordRejected | None = None


def detect_format(path: Path, explicit: str | None, mapping_default: str | None) -> Format:
    """The format to read `path` with: the explicit choice, else the mapping's, else the extension."""
    for choice in (explicit, mapping_default):
        if choice:
            if choice not in FORMATS:
                raise DocumentError(f"unknown format {choice!r}; use one of {', '.join(FORMATS)}")
            return choice
    by_extension = _EXTENSIONS.get(path.suffix.lower())
    if by_extension is None:
        raise DocumentError(f"cannot tell the format of {path.name} from its extension; pass --format jsonl, csv or json")
    return by_extension


def _utf8_error(exc: UnicodeDecodeError) -> str:
    return f"not valid UTF-8: byte 0x{exc.object[exc.start]:02x} at offset {exc.start} cannot be decoded"


def iter_jsonl(data: bytes) -> Iterator[RawRecord]:
    """Records of a JSON Lines document; blank lines are skipped, positions are 1-based line numbers."""
    for number, raw_line in enumerate(data.splitlines(), start=1):
        if not raw_line.strip():
            continue
        locator = f"line {number}"
        try:
            text = raw_line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield RawRecord(number, locator, error=RecordRejected("invalid_utf8", _utf8_error(exc)))
            continue
        try:
            value = loads(text)
        except json.JSONDecodeError as exc:
            yield RawRecord(number, locator, error=RecordRejected("malformed_json", f"malformed JSON: {exc.msg} at column {exc.colno}"))
            continue
        if isinstance(value, Unreadable):
            yield RawRecord(number, locator, error=RecordRejected(value.reason, f"the record {value.detail}"))
            continue
        if not isinstance(value, dict):
            yield RawRecord(number, locator, error=RecordRejected("wrong_type", f"expected a JSON object, got {type(value).__name__}"))
            continue
        yield RawRecord(number, locator, value=value)


def iter_csv(data: bytes) -> Iterator[RawRecord]:
    """Rows of a CSV document with a header line; positions are line numbers (the header is line 1).

    Empty cells are left out of the record, so a mapping sees them as missing.
    """
    text = data.decode("utf-8", errors="surrogateescape").lstrip("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise DocumentError(f"CSV header cannot be read: {exc}") from exc
    if any("\udc80" <= char <= "\udcff" for name in header for char in name):
        raise DocumentError("CSV header is not valid UTF-8")
    columns = [name.strip() for name in header]
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            line = reader.line_num
            yield RawRecord(line, f"line {line}", error=RecordRejected("malformed_csv", f"malformed CSV: {exc}"))
            continue
        line = reader.line_num
        locator = f"line {line}"
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(columns):
            yield RawRecord(line, locator, error=RecordRejected("malformed_csv", f"expected {len(columns)} columns, got {len(row)}"))
            continue
        try:
            "".join(row).encode("utf-8")
        except UnicodeEncodeError:
            bad = "".join(row).encode("utf-8", errors="surrogateescape")
            yield RawRecord(line, locator, error=RecordRejected("invalid_utf8", _utf8_error(_first_decode_error(bad))))
            continue
        yield RawRecord(line, locator, value={name: cell for name, cell in zip(columns, row, strict=True) if cell != ""})


def _first_decode_error(data: bytes) -> UnicodeDecodeError:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc
    return UnicodeDecodeError("utf-8", data, 0, 1, "invalid")  # pragma: no cover - caller saw an error


def iter_json_array(data: bytes, records_path: str | None) -> Iterator[RawRecord]:
    """Elements of the array found at `records_path` (the document itself when None); 0-based indexes."""
    try:
        document = loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DocumentError(f"document is {_utf8_error(exc)}") from exc
    except json.JSONDecodeError as exc:
        raise DocumentError(f"document is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    yield from iter_parsed_array(document, records_path)


def iter_parsed_array(document: object, records_path: str | None) -> Iterator[RawRecord]:
    """Elements of an already-parsed document's record array (see `iter_json_array`)."""
    array = document if not records_path else resolve_path(document, records_path)
    if not isinstance(array, list):
        where = f"at {records_path!r}" if records_path else "at the top level"
        raise DocumentError(f"expected an array of records {where}, found {'nothing' if is_missing(array) else type(array).__name__}")
    for index, value in enumerate(array):
        locator = f"index {index}"
        if isinstance(value, dict):
            yield RawRecord(index, locator, value=value)
        elif isinstance(value, Unreadable):
            yield RawRecord(index, locator, error=RecordRejected(value.reason, f"the record {value.detail}"))
        else:
            yield RawRecord(index, locator, error=RecordRejected("wrong_type", f"expected a JSON object, got {type(value).__name__}"))


def iter_records(data: bytes, fmt: Format, records_path: str | None = None) -> Iterator[RawRecord]:
    """Records of a document in format `fmt` (see the format-specific readers)."""
    if fmt == "jsonl":
        return iter_jsonl(data)
    if fmt == "csv":
        return iter_csv(data)
    return iter_json_array(data, records_path)
