"""The tests' own layout (docs/getting-started.md, "Tests", `tests/plugins/kinds.py`): every test module lies in
`tests/<domain>/<kind>/`, so its folder gives it exactly one kind; the domains are the product's;
and every folder on the way is a package, so two modules of one name in two kinds never clash.
The same rule stops a run whose collected tests lack a kind; this check names the stray file even
when a run selects other tests."""

from __future__ import annotations

from pathlib import Path

from tests.plugins.kinds import KINDS, TESTS, folder_kind

DOMAINS = {"sources", "dedup", "items", "evals", "runs", "evidence", "core", "client", "ui"}
MODULES = sorted(TESTS.rglob("test_*.py"))


def test_every_test_module_lies_in_a_kind_folder_of_a_domain() -> None:
    assert MODULES
    stray = [str(path.relative_to(TESTS)) for path in MODULES if folder_kind(path) is None]
    assert stray == [], f"test modules outside tests/<domain>/<{'|'.join(KINDS)}>/"


def test_the_domains_are_the_products() -> None:
    assert {path.relative_to(TESTS).parts[0] for path in MODULES} == DOMAINS


def test_every_folder_of_tests_is_a_package() -> None:
    folders = {folder for path in MODULES for folder in path.relative_to(TESTS).parents if folder != Path()}
    assert sorted(str(folder) for folder in folders if not (TESTS / folder / "__init__.py").is_file()) == []
