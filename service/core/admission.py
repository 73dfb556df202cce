"""What each route admits before its body is read: the scopes its token needs, whether it needs a
token at all, how large a body it takes, the media types it reads, and checks of its headers.

Routes state these through their dependencies, so the statement moves with the route: `require`
and `require_any` (`service.core.auth`) carry their scopes; `public` marks a route that
authenticates its own way (a signed webhook); `small_body` lowers the body limit; `before_body`
attaches a check of the headers to a dependency. The media types come from the route's documented
request body. `RequestGuard` (`service.core.guard`) looks a request's route up here and refuses it
before one byte of the body is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

SCOPES = "goldenset_scopes"
PUBLIC = "goldenset_public"
BODY_LIMIT = "goldenset_body_limit"
BEFORE_BODY = "goldenset_before_body"
JSON = "application/json"

HeaderCheck = Callable[[Headers], None]
"""Raises `service.core.problems.ProblemError` when the headers alone refuse the request."""


@dataclass(frozen=True)
class Admission:
    """What one route admits. `scopes`: a token needs one of them (None: not stated). `public`: no
    bearer token. `body_limit`: the largest body (None: the server's). `media_types`: the
    `Content-Type`s its body may have (None: not checked). `checks`: header checks run first."""

    scopes: frozenset[str] | None = None
    public: bool = False
    body_limit: int | None = None
    media_types: frozenset[str] | None = None
    checks: tuple[HeaderCheck, ...] = ()

    @property
    def known(self) -> bool:
        """Whether the route states who may call it (a scope, or public)."""
        return self.public or self.scopes is not None

    def accepts(self, media_type: str) -> bool:
        """Whether a body of `media_type` (lower case, without parameters; empty: none given, read
        as JSON) is one the route reads."""
        if self.media_types is None:
            return True
        if JSON in self.media_types and (media_type in ("", JSON) or (media_type.startswith("application/") and media_type.endswith("+json"))):
            return True
        return media_type in self.media_types


def needs_scopes(dependency: Callable[..., Any], *scopes: str) -> None:
    """State that the route using `dependency` needs a token with one of `scopes`."""
    setattr(dependency, SCOPES, frozenset(scopes))


def public() -> Callable[[], None]:
    """A dependency marking its route as taking no bearer token (it authenticates otherwise)."""

    def no_token() -> None:
        return None

    setattr(no_token, PUBLIC, True)
    return no_token


def small_body(limit: int) -> Callable[[], None]:
    """A dependency limiting its route's body to `limit` bytes (413 above), below the server's."""

    def limited() -> None:
        return None

    setattr(limited, BODY_LIMIT, limit)
    return limited


def before_body(dependency: Callable[..., Any], check: HeaderCheck) -> None:
    """Run `check` on the headers of every request to a route using `dependency`, before its body is read."""
    setattr(dependency, BEFORE_BODY, check)


def _calls(dependant: Dependant) -> Iterator[Any]:
    stack = list(dependant.dependencies)
    while stack:
        current = stack.pop()
        if current.call is not None:
            yield current.call
        stack.extend(current.dependencies)


def api_routes(routes: list[BaseRoute]) -> list[Any]:
    """The app's API routes in the order the router tries them, each with its dependencies as
    included (router-level ones too)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # pragma: no cover - FastAPI before route contexts flattened included routers
        return [route for route in routes if isinstance(route, APIRoute)]
    return [context for context in iter_route_contexts(routes) if isinstance(context.original_route, APIRoute)]


def _media_types(route: Any) -> frozenset[str] | None:
    documented = (route.openapi_extra or {}).get("requestBody", {}).get("content")
    if isinstance(documented, dict):
        return frozenset(str(media_type).lower() for media_type in documented)
    if route.body_field is not None:
        return frozenset({str(getattr(route.body_field.field_info, "media_type", JSON)).lower()})
    return None


def admission_of(route: Any) -> Admission:
    """What `route` (an `APIRoute`, or FastAPI's context of one) admits, from its dependencies and documented body."""
    scopes: set[str] | None = None
    is_public = False
    limit: int | None = None
    checks: list[HeaderCheck] = []
    for call in _calls(route.dependant):
        if (stated := getattr(call, SCOPES, None)) is not None:
            # Several scope dependencies on one route: each must pass, so the narrowest governs.
            scopes = set(stated) if scopes is None else scopes & set(stated)
        is_public = is_public or bool(getattr(call, PUBLIC, False))
        if (own := getattr(call, BODY_LIMIT, None)) is not None:
            limit = own if limit is None else min(limit, own)
        if (check := getattr(call, BEFORE_BODY, None)) is not None:
            checks.append(check)
    return Admission(scopes=None if scopes is None else frozenset(scopes), public=is_public, body_limit=limit, media_types=_media_types(route), checks=tuple(checks))


class AdmissionTable:
    """Every API route of an app with what it admits, looked up the way the router matches."""

    def __init__(self, routes: list[BaseRoute]) -> None:
        self.entries = [(route, admission_of(route)) for route in api_routes(routes)]

    def lookup(self, scope: Scope) -> Admission | None:
        """What the route that will answer `scope` admits; None for no API route (a 404 or 405, a page mount)."""
        for route, admission in self.entries:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return admission
        return None
