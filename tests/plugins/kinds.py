"""Every test's kind, read from where it lies: `tests/<domain>/<kind>/test_*.py`.

The domain folders mirror the product (sources, dedup, items, evals, runs, evidence, core, client,
ui); inside each, the folder says what a test needs, and becomes its marker, so a run selects by
kind across every domain (`pytest -m "unit or integration"`, `make test-fast`):

- `unit`: no database and no server: pure functions, models, files and scans of the source;
- `integration`: a real database on each backend of GOLDENSET_TEST_DATABASES, the app in process
  (or served by a uvicorn thread on loopback), vendors and models replayed on loopback;
- `e2e`: the product as its users meet it: the API over a real socket, the `goldenset` commands
  (in process or as real processes), processes over a PostgreSQL database of their own, installs,
  the harnesses and the runnable examples of the README and docs/;
- `browser`: the web UI in headless Chromium against a real `goldenset serve`.

A test module outside a kind folder is a collection error, which stops every run that collects it,
whatever `-m` selects; a test that also marks itself with another kind fails. Registered by
`tests/conftest.py`; the markers are declared in `pyproject.toml` (`--strict-markers`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from pathlib import Path

import pytest

KINDS = ("unit", "integration", "e2e", "browser")
TESTS = Path(__file__).resolve().parents[1]


def folder_kind(path: Path) -> str | None:
    """The kind named by the folder of a test module at `tests/<domain>/<kind>/...`, or None."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    if len(parts) >= 3 and parts[1] in KINDS:
        return parts[1]
    return None


class KindlessModule(pytest.Module):
    """A test module outside `tests/<domain>/<kind>/`: collecting it is an error naming the rule."""

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        raise self.CollectError(f"{self.nodeid} has no kind: test modules lie in tests/<domain>/<kind>/, the kind one of {', '.join(KINDS)}")


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> Generator[None, pytest.Module, pytest.Module]:
    """Each test module marked with its folder's kind (its tests inherit the marker)."""
    module = yield
    kind = folder_kind(module_path)
    if kind is None:
        return KindlessModule.from_parent(parent, path=module_path)
    module.add_marker(kind)
    return module


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that marks itself with a kind besides its folder's fails, naming its kinds."""
    kinds = sorted({mark.name for mark in item.iter_markers() if mark.name in KINDS})
    if len(kinds) != 1:
        pytest.fail(f"{item.nodeid} has the kinds {kinds}: a test has exactly one, its folder's (tests/<domain>/<kind>/)", pytrace=False)
