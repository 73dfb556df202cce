"""The exit status of a command refused over the API (`service.core.remote.remote_failure`) is the
one it gives on the database: by the problem's `reason` where the contract names one
(`service.core.terminal.REASON_EXITS`: a refresh lock held too long, a refresh that cannot run),
else by its HTTP status."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from goldenset_client.errors import error_for

from curation.refusals import Refused
from service.core.remote import remote_failure
from service.core.terminal import EXIT_BUDGET, EXIT_BUSY, EXIT_FAILED, EXIT_REFUSED, EXIT_REJECTED, EXIT_USAGE, refusal_exit


def _answer(status: int, **problem: Any) -> httpx.Response:
    body = {"type": "about:blank", "title": "Refused", "status": status, "detail": "what happened", **problem}
    return httpx.Response(status, json=body, headers={"Content-Type": "application/problem+json"}, request=httpx.Request("POST", "http://goldenset.test/v1/x"))


@pytest.mark.parametrize(
    ("status", "problem", "code"),
    [
        (409, {"reason": "busy"}, EXIT_BUSY),
        (409, {"reason": "cannot_refresh"}, EXIT_USAGE),
        (409, {"reason": "withdrawn"}, EXIT_REJECTED),
        (409, {}, EXIT_REJECTED),
        (422, {"reason": "future_period"}, EXIT_USAGE),
        (404, {}, EXIT_USAGE),
        (403, {"condition": "sealed_budget"}, EXIT_BUDGET),
        (403, {}, EXIT_REFUSED),
        (503, {}, EXIT_FAILED),
        (409, {"reason": ["busy"]}, EXIT_REJECTED),  # a reason that is no string is no reason
    ],
)
def test_a_refusal_over_the_api_exits_as_on_the_database(status: int, problem: dict[str, Any], code: int) -> None:
    assert remote_failure(error_for(_answer(status, **problem))).exit_code == code


def test_the_reasons_decide_for_refusals_on_the_database_too() -> None:
    assert refusal_exit(Refused("busy", "another refresh holds the eval", 409)).exit_code == EXIT_BUSY
    assert refusal_exit(Refused("withdrawn", "withdrawn already", 409)).exit_code == EXIT_REJECTED
    assert refusal_exit(Refused("not_found", "no item 9", 404)).exit_code == EXIT_USAGE
