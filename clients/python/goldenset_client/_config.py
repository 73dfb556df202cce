"""What `Client` and `AsyncClient` share: their settings, checked once, and how an answer becomes
a result or an error."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import httpx

from goldenset_client.errors import GoldensetError, error_for
from goldenset_client.retry import RetryPolicy, retry_after_seconds

__version__ = "0.1.0"

URL_VARIABLE = "GOLDENSET_URL"
TOKEN_VARIABLE = "GOLDENSET_TOKEN"
PORT_VARIABLE = "PORT"
"""The port `make run` serves on (`make run PORT=8080`): the default URL follows it."""
DEFAULT_PORT = 8000
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
RESULTS_BATCH = 1000
"""Scores sent per `POST /v1/runs/{id}/results` (the server takes up to 10,000)."""


@dataclass(frozen=True)
class Settings:
    """A client's settings, checked: `base_url` without its trailing slash, the bearer `token`,
    `timeout` seconds per attempt, and the retry `policy`."""

    base_url: str
    token: str
    timeout: float
    policy: RetryPolicy

    @classmethod
    def check(cls, base_url: str, token: str | None, *, timeout: float, retries: int, backoff: float, max_backoff: float) -> Settings:
        """Settings from a client's arguments; a ValueError says how to fix a wrong one."""
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL such as {DEFAULT_URL}, got {base_url!r}")
        if not token:
            raise ValueError(f"a token is needed: create one with `goldenset token create --scopes read` (or set {TOKEN_VARIABLE} and use from_env())")
        if retries < 0:
            raise ValueError(f"retries counts the tries after the first, at least 0 (got {retries})")
        if timeout <= 0:
            raise ValueError(f"timeout is seconds per attempt, more than 0 (got {timeout})")
        return cls(base_url.rstrip("/"), token, timeout, RetryPolicy(attempts=retries + 1, backoff=backoff, max_backoff=max_backoff))

    def http_options(self) -> dict[str, Any]:
        """Keyword arguments for `httpx.Client` / `httpx.AsyncClient`."""
        headers = {"Authorization": f"Bearer {self.token}", "User-Agent": f"goldenset-client/{__version__}", "Accept": "application/json"}
        return {"base_url": self.base_url, "headers": headers, "timeout": self.timeout}


def default_url() -> str:
    """The URL of a goldenset on this machine: http://127.0.0.1:$PORT, port 8000 when PORT is unset
    or empty, as `make run` serves it."""
    return f"http://127.0.0.1:{os.environ.get(PORT_VARIABLE) or DEFAULT_PORT}"


def env_arguments(base_url: str | None, token: str | None) -> tuple[str, str]:
    """`base_url` and `token`, each taken from GOLDENSET_URL / GOLDENSET_TOKEN when not given
    (without GOLDENSET_URL, the URL is `default_url()`: http://127.0.0.1:$PORT, or port 8000). A
    ValueError names the missing variable."""
    url = base_url or os.environ.get(URL_VARIABLE) or default_url()
    secret = token or os.environ.get(TOKEN_VARIABLE)
    if not secret:
        raise ValueError(f"set {TOKEN_VARIABLE} to a goldenset token (create one with `goldenset token create --scopes read`)")
    return url, secret


def refusal(response: httpx.Response) -> GoldensetError:
    """The error for a refused answer whose body was read (see `goldenset_client.errors`)."""
    retry_after = retry_after_seconds(response, time.time()) if response.status_code == 429 else None
    return error_for(response, retry_after)
