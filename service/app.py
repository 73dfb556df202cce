"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from sqlalchemy.engine import Engine

from curation.dedup.embeddings import Encoder
from service.core import routes as core_routes
from service.core.concurrency import ConcurrentRequests
from service.core.db import make_engine, write_transaction
from service.core.disconnects import DisconnectRecovery
from service.core.guard import RequestGuard
from service.core.metrics import Metrics
from service.core.openapi import openapi_document
from service.core.problems import install_problem_handlers
from service.core.rate_limits import RateLimits
from service.core.request_context import RequestContext
from service.core.settings import Role, Settings, get_settings, warn_if_development_secret_key
from service.core.tokens import ensure_bootstrap_admin
from service.dedup import routes as dedup_routes
from service.dedup.encoder import StoredVectorsOnly, get_encoder, model_identity
from service.dedup.reader import DedupReader
from service.dedup.runner import CurationTrigger
from service.evals import routes as eval_routes
from service.evals.content_cache import ReleaseContentCache
from service.evals.read_audit import install_release_read_audit
from service.evidence import routes as evidence_routes
from service.evidence.probe_worker import ProbeWorker
from service.items import routes as item_routes
from service.runs import routes as run_routes
from service.sources import routes as source_routes
from service.ui import routes as ui_routes

DOC_PAGE_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
# API answers are data, never pages: nothing in them may load, run or be framed.
SECURITY_HEADERS = {**DOC_PAGE_HEADERS, "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'"}
DOC_PAGES = ("/docs", "/redoc")
# The documentation pages run their bundled scripts (served under /docs/static) and nothing from
# elsewhere: ReDoc's sidebar asks for its vendor's logo from a CDN, which this blocks (it then
# hides the image), so reading the docs never contacts another site.
DOC_PAGE_POLICY = {
    **DOC_PAGE_HEADERS,
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "worker-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'",
}
DOC_ASSETS = "/docs/static"
# Pages of the web UI load their own scripts, styles and images, and nothing from elsewhere.
UI_HEADERS = {
    **DOC_PAGE_HEADERS,
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; connect-src 'self'",
}
# `/v1/dedup/check` requests embedding at once (each encode already uses every core).
DEDUP_CHECK_CONCURRENCY = 2


def _headers_for(path: str) -> dict[str, str]:
    """The security headers of an answer: API data may load nothing; UI pages only their own assets."""
    if path in DOC_PAGES:
        return DOC_PAGE_POLICY
    if path == "/" or path == "/ui" or path.startswith("/ui/"):
        return UI_HEADERS
    return SECURITY_HEADERS


def create_app(
    settings: Settings | None = None,
    *,
    engine: Engine | None = None,
    encoder: Encoder | None = None,
    curation_trigger: CurationTrigger | None = None,
    role: Role = "all",
) -> FastAPI:
    """Build the app. The schema must already be migrated (`goldenset migrate`; `serve` does it).

    `encoder` replaces the process-wide embedding model (loaded on first use otherwise);
    `curation_trigger` replaces the background curation started after ingest (on when
    `settings.curate_after_ingest`). `role` is what the process does (`service.core.settings.Role`):
    an `api` replica never loads the model nor curates unless `settings.api_curates`; it reads the
    dedup index from stored vectors and answers `/v1/dedup/check` with 503."""
    settings = settings or get_settings()
    engine = engine or make_engine(settings.database_url, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow, pool_timeout=settings.db_pool_timeout)
    resolved = settings

    loads_model = settings.loads_model(role)

    def app_encoder() -> Encoder:
        return encoder if encoder is not None else get_encoder(resolved, engine)

    def reader_encoder() -> Encoder:
        if loads_model:
            return app_encoder()
        return StoredVectorsOnly(encoder.model_id, encoder.dim) if encoder is not None else model_identity(resolved, engine)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warn_if_development_secret_key(settings)
        if settings.admin_token is not None:
            with write_transaction(engine) as session:
                ensure_bootstrap_admin(session=session, admin_token=settings.admin_token.get_secret_value())
        try:
            yield
        finally:
            app.state.pull_executor.shutdown(wait=False, cancel_futures=True)
            app.state.probe_worker.shutdown()
            app.state.curation_trigger.shutdown()

    # The API documentation's pages load their scripts and styles from here, not from a CDN.
    app = FastAPIOffline(
        static_url=DOC_ASSETS,
        title="goldenset",
        version="0.1.0",
        summary="Private, continuously refreshed LLM evaluation sets from production incidents.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.role = role
    app.state.engine = engine
    app.state.metrics = Metrics(engine)
    app.state.rate_limits = RateLimits(settings, app.state.metrics)
    app.state.release_content_cache = ReleaseContentCache(settings.release_cache_mb * 1024 * 1024)
    app.state.pull_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pull")
    app.state.probe_worker = ProbeWorker(engine, max_workers=settings.probe_workers)
    app.state.curation_trigger = curation_trigger or CurationTrigger(engine, settings, encoder=app_encoder, enabled=settings.curate_after_ingest and loads_model)
    app.state.dedup_reader = DedupReader(settings, encoder=reader_encoder, can_encode=loads_model)
    app.state.dedup_semaphore = asyncio.Semaphore(DEDUP_CHECK_CONCURRENCY)
    install_problem_handlers(app)
    dedup_routes.install_problem_handlers(app)
    for routes in (core_routes, source_routes, item_routes, dedup_routes, eval_routes, run_routes, evidence_routes):
        app.include_router(routes.router)
    ui_routes.install(app)
    app.add_middleware(RequestGuard, settings=settings)
    install_release_read_audit(app)
    # Outside authentication and the audit of release reads, so a lost connection there is recovered too.
    app.add_middleware(DisconnectRecovery)
    # Outside everything that may take a database connection, authentication included.
    app.add_middleware(ConcurrentRequests, limit=settings.concurrent_requests)
    app.add_middleware(RequestContext, headers_for=_headers_for)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
