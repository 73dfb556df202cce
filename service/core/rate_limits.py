"""Rate limits kept in this process's memory: sign-in attempts and 401 answers per client address,
and sealed matches of `/v1/dedup/check` per token.

Each limit is a moving window (`limits.strategies.MovingWindowRateLimiter`): at most N events in
any window of its length. A refusal is a 429 problem with `Retry-After` (whole seconds until the
oldest counted event leaves the window) and is counted in `goldenset_rate_limited_total`, never
audited one by one. Every replica counts on its own, so behind a load balancer a client gets up to
N per replica; a restart forgets the counts.

The client address is the peer's, or, when the peer is a trusted proxy
(`GOLDENSET_TRUSTED_PROXIES`), the last address in `X-Forwarded-For` that is not one.
"""

from __future__ import annotations

import ipaddress
import math
import time
from dataclasses import dataclass
from typing import Literal

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from starlette.datastructures import Headers
from starlette.types import Scope

from service.core.metrics import Metrics
from service.core.problems import ProblemError
from service.core.settings import Settings, proxy_networks

LimitName = Literal["sign_in", "unauthorized", "sealed_check"]
AUDITED_SIGN_IN_REFUSALS = "5/minute"
"""Refused sign-ins audited per client address; the rest are only counted (`goldenset_sign_ins_refused`)."""


@dataclass(frozen=True)
class Limit:
    """One configured limit: what it counts, by what key, and its window."""

    name: LimitName
    item: RateLimitItem
    what: str

    @property
    def window_seconds(self) -> int:
        return int(self.item.get_expiry())


class RateLimits:
    """The process's limits, read from `settings`; refusals are counted in `metrics`."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._metrics = metrics
        self._proxies = proxy_networks(settings.trusted_proxies)
        self._audited_sign_ins = parse(AUDITED_SIGN_IN_REFUSALS)
        self.limits: dict[LimitName, Limit] = {
            "sign_in": Limit("sign_in", parse(settings.sign_in_rate_limit), "sign-in attempts from this address"),
            "unauthorized": Limit("unauthorized", parse(settings.unauthorized_rate_limit), "requests from this address were refused with 401"),
            "sealed_check": Limit("sealed_check", parse(settings.sealed_check_rate_limit), "dedup checks by this token matched an item of a sealed slice"),
        }

    def hit(self, name: LimitName, key: str) -> ProblemError | None:
        """Count one event of `name` for `key`; the 429 to answer when that was one too many."""
        limit = self.limits[name]
        if self._limiter.hit(limit.item, name, key):
            return None
        return self._refusal(limit, key)

    def audits_refused_sign_in(self, address: str) -> bool:
        """Whether a sign-in refused for its token from `address` gets an audit event (the first
        few of a burst do)."""
        return self._limiter.hit(self._audited_sign_ins, "sign_in_audit", address)

    def count(self, name: LimitName, key: str) -> None:
        """Count one event of `name` for `key` (nothing is refused now; `exhausted` tells later)."""
        self._limiter.hit(self.limits[name].item, name, key)

    def exhausted(self, name: LimitName, key: str) -> ProblemError | None:
        """The 429 to answer when `key` has no event of `name` left in the window (counts nothing)."""
        limit = self.limits[name]
        if self._limiter.test(limit.item, name, key):
            return None
        return self._refusal(limit, key)

    def _refusal(self, limit: Limit, key: str) -> ProblemError:
        self._metrics.rate_limited.labels(limit.name).inc()
        reset = self._limiter.get_window_stats(limit.item, limit.name, key).reset_time
        wait = min(max(1, math.ceil(reset - time.time())), limit.window_seconds)
        detail = f"too many {limit.what}: at most {limit.item.amount} per {_window(limit)}; try again in {wait} s"
        return ProblemError(429, "Too Many Requests", detail, headers={"Retry-After": str(wait)})

    def client_address(self, scope: Scope) -> str:
        """The address the per-client limits count (see the module's docstring)."""
        client = scope.get("client")
        peer = str(client[0]) if client else "unknown"
        if not self._proxies or not _within(peer, self._proxies):
            return peer
        forwarded = Headers(scope=scope).getlist("x-forwarded-for")
        hops = [hop.strip() for value in forwarded for hop in value.split(",") if hop.strip()]
        for hop in reversed(hops):
            if not _within(hop, self._proxies):
                return hop[:64]
        return peer


def _window(limit: Limit) -> str:
    multiples = limit.item.multiples
    return f"{multiples} {limit.item.GRANULARITY.name}s" if multiples != 1 else str(limit.item.GRANULARITY.name)


def _within(address: str, networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(parsed in network for network in networks)
