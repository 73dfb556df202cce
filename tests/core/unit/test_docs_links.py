"""The README and the documentation site's pages (docs/, built by `make docs`): every relative link
points at a file that exists, inside the repository (and, from a page of the site, inside docs/,
the only folder MkDocs serves), at a heading that exists when it names one; nothing points at the
data kept beside the checkout (`../shared`), which a clone does not have; and every page is in
mkdocs.yml's nav, which names no page that is missing. `mkdocs build --strict` checks the site's
own links too; this also covers the README and runs without building anything."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
DOCS = REPO_ROOT / "docs"
FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def pages() -> list[Path]:
    return sorted(DOCS.glob("**/*.md"))


def documents() -> list[Path]:
    return [REPO_ROOT / "README.md", *pages()]


def _prose(text: str) -> str:
    """The text without fenced blocks and code spans, where a bracket is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """A heading's anchor as MkDocs (Python-Markdown's toc) and GitHub both make it for these
    pages: markup and punctuation dropped, lower case, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(path: Path) -> set[str]:
    return {_slug(heading) for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8")))}


def _links(path: Path) -> list[str]:
    return LINK.findall(_prose(path.read_text(encoding="utf-8")))


def _nav_files(nav: Any) -> list[str]:
    """Every page file mkdocs.yml's nav names, in order, however deeply nested."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [name for entry in nav for name in _nav_files(entry)]
    if isinstance(nav, dict):
        return [name for value in nav.values() for name in _nav_files(value)]
    raise AssertionError(f"mkdocs.yml: unexpected nav entry {nav!r}")


def nav_files() -> list[str]:
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs"
    return _nav_files(config["nav"])


def test_the_site_has_pages_and_the_readme_links_into_it() -> None:
    assert len(pages()) >= 10
    listed = {target.split("#")[0] for target in _links(REPO_ROOT / "README.md") if target.startswith("docs/")}
    assert {str(page.relative_to(REPO_ROOT)) for page in pages()} - listed == set(), "pages the README's list leaves out"


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_relative_links_point_at_files_and_headings_that_exist(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "../shared" not in text, f"{path.name} points at data beside the checkout, which a clone does not have"
    root, where = (DOCS, "docs/") if path.is_relative_to(DOCS) else (REPO_ROOT, "the repository")
    wrong: list[str] = []
    for target in _links(path):
        if SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        if file_part.startswith("/"):
            wrong.append(f"{target}: an absolute path; write a relative link")
            continue
        resolved = (path.parent / file_part).resolve() if file_part else path.resolve()
        if not resolved.is_relative_to(root.resolve()):
            wrong.append(f"{target}: leaves {where} (name a repository file as code text instead)")
        elif not resolved.exists():
            wrong.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            wrong.append(f"{target}: no heading with the anchor #{anchor}")
    assert wrong == [], f"{path.relative_to(REPO_ROOT)}: {wrong}"


def test_every_page_is_in_the_nav_and_the_nav_names_only_pages() -> None:
    named = nav_files()
    assert len(named) == len(set(named)), "a page is in the nav twice"
    on_disk = {str(page.relative_to(DOCS)) for page in pages()}
    assert on_disk - set(named) == set(), "pages missing from mkdocs.yml's nav"
    assert set(named) - on_disk == set(), "mkdocs.yml's nav names pages that do not exist"
    assert named[0] == "index.md"
