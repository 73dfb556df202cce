"""What a record must be to be stored, and a JSON reader that lets one bad record cost only itself.

Both databases refuse some values that JSON and Python accept: PostgreSQL's text and jsonb refuse
NUL (U+0000), jsonb refuses NaN and infinities (and releases freeze canonical JSON without them),
and a lone surrogate (`"\\ud800"`) cannot be encoded as UTF-8 at all. Python's own JSON reader
fails a whole document over one value nested ~1,000 deep or one integer of more than 4,300 digits.

- `loads` reads a JSON text like `json.loads`, but a value nested deeper than `DEFUSE_DEPTH` in
  the document, an integer too long to read, or an object holding one key twice (JSON leaves its
  meaning open; Python would keep the last silently) becomes an `Unreadable` marker in its place
  instead of failing the document, so the record holding it can be rejected alone.
- `check_structure` refuses a raw record nested deeper than `MAX_DEPTH` or holding a marker,
  before any mapping walks it; `check_values` refuses a mapped record holding a string with NUL
  or a lone surrogate, or a non-finite number, naming the item field and the path inside it.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from collections.abc import Iterator
from typing import Any

from ingest.mapping import MappedRecord, RecordRejected

MAX_DEPTH = 64
"""The deepest a record may nest: the record object itself is level 1, each object or array in it one more."""
DEFUSE_DEPTH = 200
"""Where `loads` cuts nesting off in a document (above `MAX_DEPTH` plus any `records` path, well
below the interpreter's recursion limit); everything cut is a record over `MAX_DEPTH` anyway."""
_PATH_SHOWN = 120
# A JSON string (escapes included) or a bracket: brackets inside strings are skipped whole.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class Unreadable:
    """Stands where `loads` could not read a value; a record holding one is rejected with `reason`."""

    __slots__ = ("detail", "reason")

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail

    def __repr__(self) -> str:
        return f"<unreadable: {self.detail}>"


def loads(text: str) -> Any:
    """`text` parsed as JSON. Raises `json.JSONDecodeError` (a `ValueError`) for malformed JSON.

    The fast path is `json.loads` itself; only a document it cannot read for depth or a huge
    integer is read again with the too-deep parts and the huge integers replaced by `Unreadable`.
    Brackets are counted, not matched, inside a cut-off part: a part that is both too deep and
    malformed is reported as too deep.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError):
        pass
    marker = f"goldenset:too-deep:{secrets.token_hex(8)}"
    too_deep = Unreadable("too_deep", f"nests deeper than {MAX_DEPTH} levels")

    def object_pairs_hook(pairs: list[tuple[str, Any]]) -> Any:
        return too_deep if len(pairs) == 1 and pairs[0][0] == marker else _unique_keys(pairs)

    try:
        return json.loads(_cut_deep(text, json.dumps({marker: 0})), object_pairs_hook=object_pairs_hook, parse_int=_read_int)
    except RecursionError as exc:
        # Only an unbalanced document (more opened than closed) is left this deep.
        raise json.JSONDecodeError("the document nests too deeply to be read", text, 0) from exc


def repeated_key(pairs: list[tuple[str, Any]]) -> str | None:
    """The first key that comes twice among a JSON object's `pairs` (as `json.loads` hands them to
    an `object_pairs_hook`), or None when every key is unique."""
    if len({key for key, _ in pairs}) == len(pairs):
        return None
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None  # pragma: no cover - fewer distinct keys than pairs means one repeats


def _unique_keys(pairs: list[tuple[str, Any]]) -> Any:
    """The object of `pairs`, or an `Unreadable` naming the first key that comes twice."""
    key = repeated_key(pairs)
    if key is None:
        return dict(pairs)
    return Unreadable("duplicate_key", f"has the key {key!r} more than once; each key of an object must be unique")


def _read_int(digits: str) -> int | Unreadable:
    try:
        return int(digits)
    except ValueError:
        return Unreadable("number_too_long", f"is an integer of {len(digits.lstrip('-'))} digits, more than can be read")


def _cut_deep(text: str, replacement: str) -> str:
    """`text` with each balanced object or array opening at depth `DEFUSE_DEPTH + 1` replaced."""
    pieces: list[str] = []
    depth = 0
    kept_until = 0
    cut_from: int | None = None
    for token in _TOKENS.finditer(text):
        char = token.group()[0]
        if char == '"':
            continue
        if char in "[{":
            depth += 1
            if depth == DEFUSE_DEPTH + 1:
                cut_from = token.start()
            continue
        if depth == DEFUSE_DEPTH + 1 and cut_from is not None:
            pieces.append(text[kept_until:cut_from])
            pieces.append(replacement)
            kept_until, cut_from = token.end(), None
        depth = max(depth - 1, 0)
    pieces.append(text[kept_until:])
    return "".join(pieces)


def _show(path: str) -> str:
    return path if len(path) <= _PATH_SHOWN else f"{path[:_PATH_SHOWN]}…"


def _walk(value: object, path: str, level: int) -> Iterator[tuple[object, str, int]]:
    """Every value inside `value` with its dot path and nesting level, without recursion, stopping
    below a container deeper than `MAX_DEPTH` (it is reported, not entered)."""
    stack: list[tuple[object, str, int]] = [(value, path, level)]
    while stack:
        current, where, depth = stack.pop()
        yield current, where, depth
        if depth > MAX_DEPTH:
            continue
        if isinstance(current, dict):
            for key, child in reversed(list(current.items())):
                stack.append((key, f"{where}.{key} (key)" if where else f"{key} (key)", depth))
                stack.append((child, f"{where}.{key}" if where else str(key), depth + 1))
        elif isinstance(current, list):
            stack.extend((child, f"{where}.{index}" if where else str(index), depth + 1) for index, child in reversed(list(enumerate(current))))


def check_structure(record: object) -> None:
    """Raise `RecordRejected` when the raw `record` nests deeper than `MAX_DEPTH` (reason
    `too_deep`) or holds a value the reader could not read (the marker's reason)."""
    for value, path, level in _walk(record, "", 1):
        if isinstance(value, Unreadable):
            raise RecordRejected(value.reason, f"field {_show(path)!r} {value.detail}")
        if level > MAX_DEPTH and isinstance(value, dict | list):
            raise RecordRejected("too_deep", f"field {_show(path)!r} nests deeper than {MAX_DEPTH} levels; flatten the record or leave that field out")


def _string_problem(text: str) -> tuple[str, str] | None:
    if text.isascii():
        return ("nul_character", "holds a NUL character (U+0000), which the database cannot store") if "\x00" in text else None
    if "\x00" in text:
        return "nul_character", "holds a NUL character (U+0000), which the database cannot store"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return "lone_surrogate", f"holds a lone surrogate U+{ord(text[exc.start]):04X} at offset {exc.start}, which is not valid Unicode and cannot be encoded as UTF-8"
    return None


def check_values(record: MappedRecord) -> None:
    """Raise `RecordRejected` naming the item field and path when `record` holds a string with NUL
    or a lone surrogate (`nul_character`, `lone_surrogate`), a NaN or infinite number
    (`non_finite_number`), nesting deeper than `MAX_DEPTH` (`too_deep`), or a value JSON has no
    type for (`wrong_type`)."""
    for name in ("external_id", "identity", "title", "input", "reference", "tags", "metadata"):
        for value, path, level in _walk(getattr(record, name), name, 1):
            problem: tuple[str, str] | None = None
            if isinstance(value, str):
                problem = _string_problem(value)
            elif isinstance(value, float) and not math.isfinite(value):
                problem = ("non_finite_number", f"is {value!r}; JSON numbers must be finite (NaN, Infinity and values like 1e400 that overflow are refused)")
            elif isinstance(value, Unreadable):
                problem = (value.reason, value.detail)
            elif isinstance(value, dict | list):
                if level > MAX_DEPTH:
                    problem = ("too_deep", f"nests deeper than {MAX_DEPTH} levels")
            elif not (value is None or isinstance(value, bool | int | float)):
                problem = ("wrong_type", f"holds a {type(value).__name__}, which JSON has no type for")
            if problem is not None:
                raise RecordRejected(problem[0], f"{_show(path)} {problem[1]}", record.external_id)


def printable(text: str) -> str:
    """`text` safe to show and encode: NUL and lone surrogates written as escapes."""
    if text.isascii() and "\x00" not in text:
        return text
    return text.replace("\x00", "\\u0000").encode("utf-8", errors="backslashreplace").decode("utf-8")
