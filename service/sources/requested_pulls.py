"""Pulls and curation a request starts, for the API's routes and the web pages alike: a pull now
(answered when it ends) or in the background (answered at once; what stops it is recorded on the
source and logged), and curation after ingest stored anything, in the background, never in the
request. Call them after the request handed back its database connection: a pull works on
connections of its own."""

from __future__ import annotations

import logging

from fastapi import Request

from ingest.connectors.base import ConnectorError
from schemas.problem import IngestSummary
from service.core.problems import ProblemError
from service.core.settings import Settings
from service.sources.pulls import PullRefused, pull_running, pull_source

logger = logging.getLogger("goldenset.api.sources")


def curate_if_stored(request: Request, summary: IngestSummary) -> None:
    """Start a background curation run when ingest stored new or changed items (never in the handler)."""
    if summary.new or summary.updated:
        request.app.state.curation_trigger.request()


def pull_now(request: Request, name: str, actor: str) -> IngestSummary:
    """Pull the source now, in this thread, and start curation when it stored anything."""
    settings: Settings = request.app.state.settings
    summary = pull_source(engine=request.app.state.engine, name=name, secret_key=settings.secret_key.get_secret_value(), actor=actor)
    curate_if_stored(request, summary)
    return summary


def _pull_in_background(request: Request, name: str, actor: str) -> None:
    """A pull the API started and answered already (202): it answers nobody, so what stopped it
    (a refusal, the connector's error, recorded on the source) is logged."""
    try:
        pull_now(request, name, actor)
    except (PullRefused, ConnectorError) as exc:
        logger.info("pull of %s requested over the API ended: %s", name, exc)
    except Exception:
        logger.exception("pull of %s requested over the API failed", name)


def start_pull(request: Request, name: str, actor: str) -> None:
    """Start a pull of the connector source `name` in the background, for the API and the pages;
    409 when one is already running. Call it after the request handed back its connection."""
    if pull_running(request.app.state.engine, name):
        raise ProblemError(409, "Conflict", f"a pull of source {name!r} is already running")
    request.app.state.pull_executor.submit(_pull_in_background, request, name, actor)
