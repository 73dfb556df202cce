"""The `goldenset` command line run in-process against a test database, with a given encoder
standing in for the embedding model."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest
from rich.console import Console
from typer.testing import CliRunner

from curation.dedup.embeddings import Encoder
from service.core.settings import get_settings
from tests.conftest import TEST_SECRET_KEY

REVIEW_MODULES = ("service.items.cli", "service.items.review_cli", "service.items.local_review")
"""The modules whose consoles print `goldenset review`'s pass."""


@contextmanager
def command_line(database_url: str, monkeypatch: pytest.MonkeyPatch, *, encoder: Encoder, wide: Sequence[str] = ()) -> Iterator[CliRunner]:
    """A runner whose commands use `database_url` and `encoder`; the `out` consoles of the `wide`
    modules print 200 columns, so tables are not wrapped."""
    monkeypatch.setattr("service.dedup.encoder.get_encoder", lambda _settings, _engine=None: encoder)
    for module in wide:
        monkeypatch.setattr(f"{module}.out", Console(width=200))
    monkeypatch.setenv("GOLDENSET_DATABASE_URL", database_url)
    monkeypatch.setenv("GOLDENSET_SECRET_KEY", TEST_SECRET_KEY)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()
