"""Which test a probe runs, and its reference endpoint: the strongest test the endpoints' recorded
log-probabilities allow (`auto`), or the one asked for, refused with 422 and what to change when
an endpoint cannot do it.

What an endpoint can do is what the registry records (`Endpoint.logprobs`, `LogprobSupport`):
`completions_echo` and `tgi_prefill` score a text they are sent, so they allow the
log-probability tests; `chat` and `none` allow only the completion test.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from schemas.model_registry import Endpoint, LogprobSupport, Model
from schemas.probe_tests import ProbeTest, ProbeTestChoice
from schemas.probes import ProbeCreate
from service.core.problems import ProblemError
from service.runs.model_registry import require_endpoint, require_serving_endpoint

REASON = "test_not_available"
"""The `reason` of a probe refused because an endpoint cannot run the test asked for."""


@dataclass(frozen=True)
class ReferenceEndpoint:
    """The reference test's model and the endpoint serving it."""

    model: Model
    endpoint: Endpoint


def require_reference(session: Session, data: ProbeCreate) -> ReferenceEndpoint | None:
    """The request's reference endpoint and the model it serves (`reference_model`, default the
    one it is registered for): None without one; 404 for an unknown one, 422 when it serves
    another model than named."""
    if data.reference_endpoint is None:
        if data.reference_model is not None:
            raise ProblemError(422, "No reference endpoint", "reference_model names the reference endpoint's model: give reference_endpoint too", reason=REASON)
        return None
    if data.reference_model is None:
        endpoint = require_endpoint(session=session, name=data.reference_endpoint)
        model = session.get(Model, endpoint.model_id)
        assert model is not None
        return ReferenceEndpoint(model, endpoint)
    model, endpoint = require_serving_endpoint(session=session, model=data.reference_model, endpoint=data.reference_endpoint)
    return ReferenceEndpoint(model, endpoint)


def _gives(endpoint: Endpoint) -> LogprobSupport:
    return LogprobSupport(endpoint.logprobs)


def _cannot(endpoint: Endpoint, test: ProbeTest, role: str) -> ProblemError:
    """The 422 for a test the endpoint's recorded log-probabilities do not allow, saying how to
    record what it gives."""
    gives = _gives(endpoint)
    why = {
        LogprobSupport.CHAT: "its chat log-probabilities cover only the tokens the model writes, never an item's own text",
        LogprobSupport.NONE: "it gives none, as far as the registry knows",
    }.get(gives, "")
    return ProblemError(
        422,
        "Test not available",
        f"the {test.value} test needs the log-probabilities of each item's text from the {role} endpoint, and endpoint {endpoint.name!r} records "
        f"logprobs {gives.value!r}: {why}. If it serves an OpenAI-compatible /completions with echo and logprobs (vLLM) or TGI's /generate, "
        f"record that with PATCH /v1/endpoints/{endpoint.name} {{\"logprobs\": \"completions_echo\"}} (or \"tgi_prefill\"; CLI: goldenset endpoint update "
        f"{endpoint.name} --logprobs completions_echo); otherwise ask for test 'completion' or 'auto'; nothing was sent",
        reason=REASON,
        endpoint=endpoint.name,
        logprobs=gives.value,
    )


def choose_test(choice: ProbeTestChoice, endpoint: Endpoint, reference: ReferenceEndpoint | None) -> ProbeTest:
    """The test to run. `auto`: `reference_logprob` when a reference is given and both endpoints
    score a text they are sent, else `logprob` when the target's does, else `completion`. A test
    named outright must be one the endpoints allow, and a reference endpoint is given only for the
    reference test (or `auto`); otherwise 422 (`reason` test_not_available) saying what to change."""
    target_scores = _gives(endpoint).scores_prompts
    if choice is ProbeTestChoice.AUTO:
        if reference is not None and target_scores and _gives(reference.endpoint).scores_prompts:
            return ProbeTest.REFERENCE_LOGPROB
        return ProbeTest.LOGPROB if target_scores else ProbeTest.COMPLETION
    test = ProbeTest(choice.value)
    if test is not ProbeTest.REFERENCE_LOGPROB and reference is not None:
        detail = f"a reference endpoint is used only by the reference_logprob test: leave it out of a {test.value} test, or ask for test 'reference_logprob'"
        raise ProblemError(422, "Test not available", detail, reason=REASON)
    if test is ProbeTest.COMPLETION:
        return test
    if not target_scores:
        raise _cannot(endpoint, test, "probed")
    if test is ProbeTest.REFERENCE_LOGPROB:
        if reference is None:
            raise ProblemError(422, "Test not available", "the reference_logprob test compares the model with a reference model: give reference_endpoint", reason=REASON)
        if not _gives(reference.endpoint).scores_prompts:
            raise _cannot(reference.endpoint, test, "reference")
    return test
