"""What kind of text an item is, for the paraphrase stage: a long report, a short sentence, or a
short machine-written message (a log line, an alert, a status event).

Embeddings judge meaning, and two short machine messages that differ in one word usually mean
different events ("VM started" / "VM paused", "Running task 3" / "Finished task 3"), while their
embeddings are nearly equal. So for short machine messages only exact and near-verbatim copies
count, and short sentences need a higher cosine than long reports, whose embeddings average
over many words. Measured on ../shared/data (see the figures in docs/dedup-figures.md).
"""

from __future__ import annotations

import re
from enum import StrEnum

# Placeholders the normalisation puts where volatile machine tokens were (numbers alone are not a sign).
_MACHINE_PLACEHOLDERS = re.compile(r"<(?:ip|hex|uuid|ts|url|date|host|path)>")
_REDACTED = re.compile(r"<[A-Z][A-Z0-9_]*>")  # redaction placeholders such as <EMAIL>: not a sign
_MACHINE_SIGNS = [
    re.compile(r"[=_\\\[\]{}|<>]|[a-z_]:\S|\(\)", re.IGNORECASE),  # key=value, snake_case, brackets, key:value, call()
    re.compile(r"\b(?!Mc|Mac)[A-Z][a-z]+[A-Z][a-z]+\w*|\b[a-z]{2,}[A-Z][a-z]+\w*"),  # CamelCase and camelCase identifiers
    re.compile(r"\b[a-z_]\w*\.[a-z_]\w*\.[a-z_]\w*", re.IGNORECASE),  # dotted names: com.example.Service (not versions: 3.8.2)
    re.compile(r"(?:^|\s)/\w"),  # paths
]


class TextKind(StrEnum):
    LONG = "long"
    SHORT = "short"
    MACHINE = "short machine message"


def looks_machine_written(text: str, normalised: str) -> bool:
    """Whether a text (as stored, and as normalised) is one line that carries the marks of
    software output: masked addresses, ids, timestamps, hosts or paths; key=value pairs, brackets,
    identifiers in CamelCase or snake_case; dotted names. A report with a title and a body is
    never one, even when it names classes and methods."""
    if "\n" in text.strip():
        return False
    if _MACHINE_PLACEHOLDERS.search(normalised):
        return True
    raw = _REDACTED.sub(" ", text)
    return any(sign.search(raw) for sign in _MACHINE_SIGNS)


def text_kind(text: str, normalised: str, token_count: int, *, short_tokens: int) -> TextKind:
    """LONG above `short_tokens` tokens; otherwise MACHINE or SHORT by `looks_machine_written`."""
    if token_count > short_tokens:
        return TextKind.LONG
    return TextKind.MACHINE if looks_machine_written(text, normalised) else TextKind.SHORT
