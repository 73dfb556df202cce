"""Word-level differences between two texts, as escaped HTML for the pages.

Texts are compared word by word (a change of spacing alone is not a difference); tag lists tag by
tag. Removed words are wrapped in `<del>`, added ones in `<ins>`, and every piece of text is
escaped, so the results are safe to insert as they are. Pairs longer than `MAX_TOKENS` pieces in
all are shown as wholly replaced rather than compared, so a page never spends long on one pair.

- `inline_diff(before, after)`: one text, the removals and additions in place (revisions).
- `side_by_side(before, after)`: both texts, `before` with its own words in `<del>` and `after`
  with its own in `<ins>` (an item beside its nearest earlier item).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher

from markupsafe import Markup, escape

MAX_TOKENS = 8000
_PIECES = re.compile(r"^\s+|\S+\s*")
_DEL = Markup("<del>{}</del>")
_INS = Markup("<ins>{}</ins>")
Value = str | list[str] | None


def _pieces(value: Value) -> tuple[list[str], list[str]]:
    """The pieces a value is shown in (each word with the space after it; each tag with its comma)
    and what each is compared by (the word; the tag)."""
    if value is None:
        return [], []
    if isinstance(value, list):
        return [f"{tag}, " for tag in value[:-1]] + value[-1:], list(value)
    pieces = _PIECES.findall(value)
    return pieces, [piece.strip() for piece in pieces]


def _opcodes(old: list[str], new: list[str]) -> Sequence[tuple[str, int, int, int, int]]:
    if len(old) + len(new) > MAX_TOKENS:
        return [("replace", 0, len(old), 0, len(new))]
    return SequenceMatcher(None, old, new, autojunk=False).get_opcodes()


def _joined(parts: list[Markup]) -> Markup:
    return escape("").join(parts)


def inline_diff(before: Value, after: Value) -> Markup:
    """`after` with the words removed from `before` in `<del>` and the added ones in `<ins>`. A
    value that had none before (a first revision) is shown as it is."""
    if before is None:
        return escape(", ".join(after) if isinstance(after, list) else after or "")
    (old, old_keys), (new, new_keys) = _pieces(before), _pieces(after)
    parts: list[Markup] = []
    for operation, a1, a2, b1, b2 in _opcodes(old_keys, new_keys):
        if operation == "equal":
            parts.append(escape("".join(new[b1:b2])))
            continue
        if a2 > a1:
            parts.append(_DEL.format("".join(old[a1:a2])))
        if b2 > b1:
            parts.append(_INS.format("".join(new[b1:b2])))
    return _joined(parts)


def side_by_side(before: str, after: str) -> tuple[Markup, Markup]:
    """`before` with the words only it has in `<del>`, and `after` with its own in `<ins>`."""
    (old, old_keys), (new, new_keys) = _pieces(before), _pieces(after)
    left: list[Markup] = []
    right: list[Markup] = []
    for operation, a1, a2, b1, b2 in _opcodes(old_keys, new_keys):
        if operation == "equal":
            left.append(escape("".join(old[a1:a2])))
            right.append(escape("".join(new[b1:b2])))
            continue
        if a2 > a1:
            left.append(_DEL.format("".join(old[a1:a2])))
        if b2 > b1:
            right.append(_INS.format("".join(new[b1:b2])))
    return _joined(left), _joined(right)
