"""Where a client goes when it is not told: GOLDENSET_URL, else the port `make run` serves on
(`PORT`, 8000 when unset), for `Client.from_env`, `AsyncClient.from_env` and the example pipeline
alike, so changing the port is one variable."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
from goldenset_client import AsyncClient, Client

from tests.conftest import REPO_ROOT


@pytest.fixture
def no_url(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("GOLDENSET_URL", raising=False)
    monkeypatch.delenv("PORT", raising=False)
    monkeypatch.setenv("GOLDENSET_TOKEN", "secret")
    return monkeypatch


def _base_urls() -> tuple[str, str]:
    with Client.from_env() as client:
        sync = client.settings.base_url

    async def base_url() -> str:
        async with AsyncClient.from_env() as client:
            return client.settings.base_url

    return sync, asyncio.run(base_url())


def _example_default_url() -> str:
    spec = importlib.util.spec_from_file_location("eval_pipeline", REPO_ROOT / "examples" / "eval_pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    url: str = module.default_url()
    return url


def test_without_goldenset_url_the_client_follows_port_and_falls_back_to_8000(no_url: pytest.MonkeyPatch) -> None:
    assert _base_urls() == ("http://127.0.0.1:8000", "http://127.0.0.1:8000")
    assert _example_default_url() == "http://127.0.0.1:8000"
    no_url.setenv("PORT", "")
    assert _base_urls()[0] == "http://127.0.0.1:8000"
    no_url.setenv("PORT", "8123")
    assert _base_urls() == ("http://127.0.0.1:8123", "http://127.0.0.1:8123")
    assert _example_default_url() == "http://127.0.0.1:8123"


def test_goldenset_url_and_an_explicit_url_win_over_port(no_url: pytest.MonkeyPatch) -> None:
    no_url.setenv("PORT", "8123")
    no_url.setenv("GOLDENSET_URL", "http://goldenset.test:9000/")
    assert _base_urls() == ("http://goldenset.test:9000", "http://goldenset.test:9000")
    assert _example_default_url() == "http://goldenset.test:9000/"
    with Client.from_env("http://other.test:7000") as client:
        assert client.settings.base_url == "http://other.test:7000"
