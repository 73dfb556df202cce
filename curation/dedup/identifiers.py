"""What tells "the same incident" from "the same kind of incident" in two titles.

Reports of one kind read alike: upgrades of one library, sibling subtasks for different modules,
failures of different tests in one suite, a template filled for different sites. Their embeddings
are close; what differs is what the report is *about*, and that is named in its title:

- identifiers that are the content: issue keys, CVEs, versions and other numbers, code names
  (classes, methods, tests), module and artifact names, configuration keys, host names;
- the target of a templated title: the one or two words that stand in the same place of two titles
  otherwise alike, where one of them is a name (with digits, or capitalised in a title that does
  not capitalise every word);
- scope: an umbrella, a phase, a follow-up, an addendum, an improvement of something else.

`distinction(a, b)` names the first such difference between two titles, or None when the titles
could be of one incident. Branch names never distinguish: the same change for another branch is
the same task. Only titles are compared: bodies mention many versions, classes and hosts in
passing (stack traces, environments), while a title names the task.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from functools import lru_cache

# Hyphenated English words ("follow-up", "non-blocking", "thread-safe") are not module names.
_COMPOUND_HEADS = (
    "non|multi|re|pre|post|self|co|cross|anti|sub|semi|built|read|write|follow|end|out|up|down|well|long|short|high|low|auto|over|under|zero|one|two|third|first|case|time|run"
)
_COMPOUND_TAILS = "up|in|on|out|off|only|based|safe|aware|wide|level|side|like|free|specific|related|time|end|to|driven|enabled|friendly"
_BRANCH = re.compile(r"\bbranch-[\w.]+", re.IGNORECASE)
# File names a title may name (a test, a page, a resource): a name with one of these extensions.
_FILE_TYPES = "js|jsm|mjs|ts|tsx|py|java|kt|scala|c|cc|cpp|h|hpp|rs|go|rb|php|cs|swift|html|xhtml|xul|css|json|xml|ya?ml|toml|ini|sh|md|txt|properties|ftl|dtd|sql|proto"
# A quoted word or phrase in a title: what the title is about, by its own marking.
_QUOTED = re.compile(r"(?<!\w)[\"“‘`']([^\"”’`']{1,40})[\"”’`'](?!\w)")
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("CVE", re.compile(r"\bCVE-\d{4}-\d{4,}\b", re.IGNORECASE)),
    ("issue key", re.compile(r"\b(?!CVE-)[A-Z][A-Z0-9]{1,15}-\d+\b")),
    ("host", re.compile(r"\b(?:[a-z0-9-]+\.)+(?:com|org|net|io|edu|gov|co|uk|de|fr|jp|cn|ru|info|biz|app|dev)\b", re.IGNORECASE)),
    ("file", re.compile(r"(?<![\w.-])[\w-]+(?:/[\w.-]+)*\.(?:" + _FILE_TYPES + r")\b", re.IGNORECASE)),
    ("configuration key", re.compile(r"\b[a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+){2,}\b")),
    ("module", re.compile(rf"\b(?!(?:{_COMPOUND_HEADS})-)[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*-(?!(?:{_COMPOUND_TAILS})\b)[a-z][a-z0-9]*\b")),
    ("code name", re.compile(r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[a-z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Z]{2,}[a-z][A-Za-z0-9]+|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\b")),
    ("number", re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w.]*\d)")),
)
_CASE_SENSITIVE = {"issue key", "code name"}
# A title's scope tags: leading "[Component]" groups, or a leading "Component:" word.
_TAGS = re.compile(r"^\s*((?:\[[^\]]{1,40}\]\s*:?\s*)+)|^\s*([A-Za-z][\w.-]{0,19})\s*:(?!\S)")
_SPECIFIC = ("CVE", "issue key", "number")
"""Kinds that pin a task down: two titles each pinned, by any of them, and sharing no pin, name two tasks
(an upgrade "to 2.10.3" and one "for CVE-2022-42003")."""
_ONE_SIDED = ("module", "configuration key", "host")
"""Kinds a title never names in passing: one title naming one and the other none is a narrower task (part vs whole)."""
_WORDS = re.compile(r"[A-Za-z0-9]+")
_STOPWORDS = frozenset(
    " ".join(
        (
            "a an the to of for in on and or with by from is are be as at it its this that not no when while after before into via",
            "should must can could would will fix fixes fixing fixed add adds adding added support supports update updates updated",
            "upgrade upgrades upgraded bump use using make makes remove removes removed",
        )
    ).split()
)
_SCOPE = re.compile(r"\b(?:umbrella|[uü]ber|phase|addendum|follow[- ]?up|improvements?|sub-?task|part)\b", re.IGNORECASE)
TITLE_CASE_SHARE = 0.6
SIBLING_OVERLAP = 0.5
"""Two titles aligning on at least this share of their words, each with a word in a place where the other has another, fill one template."""


@lru_cache(maxsize=65_536)
def title_identifiers(title: str) -> dict[str, frozenset[str]]:
    """The identifiers a title names, by kind (branch names left out)."""
    text = _BRANCH.sub(" ", title)
    found: dict[str, frozenset[str]] = {}
    for kind, pattern in _KINDS:
        values = {match.group(0) if kind in _CASE_SENSITIVE else match.group(0).lower() for match in pattern.finditer(text)}
        if values:
            found[kind] = frozenset(values)
        if kind in ("CVE", "issue key", "host", "file", "configuration key", "module"):
            # Their digits and hyphens are part of the name, not numbers or modules of their own.
            text = pattern.sub(" ", text)
    return found


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _spelled_out(name: str, title: str) -> bool:
    """Whether `title` names `name` in plain words (`ExternalId` as "external id", `hadoop-aws` as "hadoop aws")."""
    words = [word.lower() for word in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)]
    return len(words) > 1 and " ".join(words) in " ".join(word.lower() for word in _WORDS.findall(title))


def _tags(title: str) -> frozenset[str]:
    """A title's scope tags, spelled one way (`[JDK 13]` and `[JDK13]` are one tag)."""
    match = _TAGS.match(title)
    if match is None:
        return frozenset()
    if match.group(1):
        return frozenset(re.sub(r"\s+", "", tag).lower() for tag in re.findall(r"\[([^\]]+)\]", match.group(1)))
    return frozenset({match.group(2).lower()})


def _content_words(title: str) -> set[str]:
    return {word.lower() for word in _WORDS.findall(_BRANCH.sub(" ", title))} - _STOPWORDS


def _title_case(title: str) -> bool:
    """Whether `title` capitalises most of its words ("Navy Jet Crashes Into Apartment Block"): then a
    capital letter says nothing about a word being a name."""
    words = [word for word in _WORDS.findall(title)[1:] if len(word) > 3 and word.isalpha() and word.lower() not in _STOPWORDS]
    return len(words) >= 3 and sum(word[0].isupper() for word in words) >= TITLE_CASE_SHARE * len(words)


def _named(words: set[str], title: str) -> bool:
    """Whether any of `words` stands in `title` as a name: holding digits, in capitals ("HDFS"),
    quoted (`disallow "lao" unicode block`), or capitalised past the title's first word in a title
    that does not capitalise every word."""
    capitals_mean_names = not _title_case(title)
    quoted = {word.lower() for match in _QUOTED.finditer(title) for word in _WORDS.findall(match.group(1))}
    for word in words:
        if word.lower() in quoted:
            return True
        if any(character.isdigit() for character in word):
            return True
        for match in re.finditer(rf"(?<![A-Za-z0-9]){re.escape(word)}(?![A-Za-z0-9])", title, re.IGNORECASE):
            spelled = match.group(0)
            if (len(spelled) > 1 and spelled.isupper()) or (capitals_mean_names and match.start() > 0 and spelled[0].isupper()):
                return True
    return False


def _reworded(run_a: list[str], run_b: list[str]) -> bool:
    """Whether two runs of words are one word spelled or inflected otherwise ("JournalNode" / "journal
    node", "performing" / "perform", "testcase" / "test")."""
    joined_a, joined_b = "".join(run_a), "".join(run_b)
    shorter, longer = sorted((joined_a, joined_b), key=len)
    return len(shorter) >= 4 and longer.startswith(shorter)


def _substituted(a: str, b: str) -> tuple[set[str], set[str], float]:
    """The words of `a` and of `b` that stand in the same place of otherwise aligned titles (one
    template filled twice: "Dockerfile for CentOS 7" / "Dockerfile for Debian"): the replaced runs
    of at most two words each; and how much of the two titles aligns (difflib's ratio of their words)."""
    words_a = [word.lower() for word in _WORDS.findall(_BRANCH.sub(" ", a))]
    words_b = [word.lower() for word in _WORDS.findall(_BRANCH.sub(" ", b))]
    only_a: set[str] = set()
    only_b: set[str] = set()
    matcher = SequenceMatcher(a=words_a, b=words_b, autojunk=False)
    for operation, start_a, end_a, start_b, end_b in matcher.get_opcodes():
        if operation == "replace" and end_a - start_a <= 2 and end_b - start_b <= 2 and not _reworded(words_a[start_a:end_a], words_b[start_b:end_b]):
            only_a.update(set(words_a[start_a:end_a]) - _STOPWORDS)
            only_b.update(set(words_b[start_b:end_b]) - _STOPWORDS)
    return only_a, only_b, matcher.ratio()


def distinction(a: str, b: str) -> str | None:
    """What makes titles `a` and `b` name different things, in words (None: nothing does)."""
    ids_a, ids_b = title_identifiers(a), title_identifiers(b)
    for kind, _ in _KINDS:
        if kind == "file":
            # One file each, by its base name: a title listing several files (the tests an
            # intermittent failure hit) names a symptom, not its target.
            files_a, files_b = ids_a.get(kind, frozenset()), ids_b.get(kind, frozenset())
            if len(files_a) == 1 and len(files_b) == 1 and _basename(next(iter(files_a))) != _basename(next(iter(files_b))):
                return f"different file: {_basename(next(iter(files_a)))} vs {_basename(next(iter(files_b)))}"
            continue
        only_a = {name for name in ids_a.get(kind, frozenset()) - ids_b.get(kind, frozenset()) if not _spelled_out(name, b)}
        only_b = {name for name in ids_b.get(kind, frozenset()) - ids_a.get(kind, frozenset()) if not _spelled_out(name, a)}
        if only_a and only_b:
            return f"different {kind}: {', '.join(sorted(only_a))} vs {', '.join(sorted(only_b))}"
    specific_a = set().union(*(ids_a.get(kind, frozenset()) for kind in _SPECIFIC))
    specific_b = set().union(*(ids_b.get(kind, frozenset()) for kind in _SPECIFIC))
    if specific_a and specific_b and not specific_a & specific_b:
        return f"different target: {', '.join(sorted(specific_a))} vs {', '.join(sorted(specific_b))}"
    tags_a, tags_b = _tags(a), _tags(b)
    if tags_a != tags_b:
        return f"different scope: tagged {', '.join(sorted(tags_a)) or 'nothing'} vs {', '.join(sorted(tags_b)) or 'nothing'}"
    for kind in _ONE_SIDED:
        named_a, named_b = ids_a.get(kind, frozenset()), ids_b.get(kind, frozenset())
        if bool(named_a) != bool(named_b):
            return f"different scope: only one names a {kind} ({', '.join(sorted(named_a | named_b))})"
    words_a, words_b = _content_words(a), _content_words(b)
    only_a, only_b, aligned = _substituted(a, b)
    only_a, only_b = only_a - words_b, only_b - words_a
    if only_a and only_b and aligned >= SIBLING_OVERLAP and (_named(only_a, a) or _named(only_b, b)):
        return f"one template, different target: {', '.join(sorted(only_a))} vs {', '.join(sorted(only_b))}"
    scope_a = {match.group(0).lower() for match in _SCOPE.finditer(a)}
    scope_b = {match.group(0).lower() for match in _SCOPE.finditer(b)}
    if scope_a != scope_b:
        return f"different scope: {', '.join(sorted(scope_a ^ scope_b))}"
    return None
