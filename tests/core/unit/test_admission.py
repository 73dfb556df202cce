"""Every API route states who may call it, so the guard can refuse before reading a body; the
statement is read from the routes themselves and so follows them as they change."""

from __future__ import annotations

from service.app import create_app
from service.core.admission import AdmissionTable
from service.core.settings import Settings


def _table() -> AdmissionTable:
    app = create_app(Settings(env="test", database_url="sqlite:///:memory:"))
    return AdmissionTable(app.router.routes)


def test_every_api_route_states_its_scope_or_that_it_is_public() -> None:
    table = _table()
    api = [(sorted(route.methods), route.path, admission) for route, admission in table.entries if route.path.startswith("/v1/")]
    assert len(api) > 50
    assert [(methods, path) for methods, path, admission in api if not admission.known] == []
    public = {path for _, path, admission in api if admission.public}
    assert public == {"/v1/sources/{name}/webhook"}


def test_scopes_are_those_the_routes_check() -> None:
    by_route = {(method, route.path): admission for route, admission in _table().entries for method in route.methods}
    assert by_route[("POST", "/v1/sources/{name}/items")].scopes == frozenset({"ingest"})
    assert by_route[("GET", "/v1/audit")].scopes == frozenset({"admin"})
    assert by_route[("POST", "/v1/evals/{name}/runs")].scopes == frozenset({"read", "sealed"})
    assert by_route[("POST", "/v1/sources/{name}/webhook")].checks
    assert by_route[("POST", "/ui/login")].body_limit == 8 * 1024
