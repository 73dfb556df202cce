"""The per-process cache of finished release answers: bounded by bytes with the least recently used
entry out first, no entry over a quarter of the bound, nothing kept at bound 0, one build per
missing key however many callers ask at once, and nothing kept from a build that failed."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from service.evals.content_cache import CachedContent, ReleaseContentCache


def _entry(size: int, number: int = 1) -> CachedContent:
    return CachedContent(body=b"x" * size, item_ids=(number,), release_number=number, headers={"ETag": f'"{number}"'})


def test_the_least_recently_used_entry_goes_first_and_a_read_one_stays() -> None:
    cache = ReleaseContentCache(400)
    for key in ("a", "b", "c", "d"):
        cache.put(key, _entry(100))
    assert cache.size == 400
    assert cache.get("a") is not None  # a is now the most recently used; b the least

    cache.put("e", _entry(100))  # b goes: the order is now c, d, a, e
    assert cache.get("b") is None and cache.size == 400
    cache.put("f", _entry(100))  # c goes: d, a, e, f
    assert cache.get("c") is None and cache.size == 400
    assert [key for key in "abcdef" if cache.get(key) is not None] == ["a", "d", "e", "f"]


def test_eviction_counts_bytes_not_entries() -> None:
    cache = ReleaseContentCache(400)
    for key in ("a", "b", "c", "d"):
        cache.put(key, _entry(50))
    cache.put("big", _entry(100))
    assert cache.size == 300 and all(cache.get(key) is not None for key in ("a", "b", "c", "d", "big"))
    cache.put("big2", _entry(100))
    cache.put("big3", _entry(100))  # 500 bytes asked: the two oldest 50-byte entries go
    assert cache.get("a") is None and cache.get("b") is None
    assert all(cache.get(key) is not None for key in ("c", "d", "big", "big2", "big3")) and cache.size == 400


def test_replacing_a_key_does_not_count_its_old_body() -> None:
    cache = ReleaseContentCache(400)
    cache.put("a", _entry(100, 1))
    cache.put("a", _entry(60, 2))
    entry = cache.get("a")
    assert entry is not None and entry.release_number == 2 and cache.size == 60


def test_an_entry_over_a_quarter_of_the_bound_is_not_kept() -> None:
    cache = ReleaseContentCache(400)
    cache.put("small", _entry(100))
    cache.put("large", _entry(101))
    assert cache.get("large") is None and cache.get("small") is not None and cache.size == 100

    built: list[int] = []

    def build() -> CachedContent:
        built.append(1)
        return _entry(101)

    assert cache.get_or_build("large", build).body == b"x" * 101
    assert cache.get_or_build("large", build).body == b"x" * 101
    assert len(built) == 2 and cache.get("small") is not None and cache.size == 100


def test_bound_zero_keeps_nothing() -> None:
    cache = ReleaseContentCache(0)
    cache.put("a", _entry(1))
    cache.put("empty", _entry(0))
    assert cache.get("a") is None and cache.get("empty") is None and cache.size == 0
    built: list[int] = []

    def build() -> CachedContent:
        built.append(1)
        return _entry(1)

    for _ in range(3):
        cache.get_or_build("a", build)
    assert len(built) == 3 and cache.size == 0


def test_concurrent_callers_of_one_missing_key_share_a_single_build() -> None:
    cache = ReleaseContentCache(1 << 20)
    callers = 8
    barrier = threading.Barrier(callers)
    started = threading.Event()
    calls: list[int] = []
    lock = threading.Lock()

    def build() -> CachedContent:
        with lock:
            calls.append(1)
        started.set()
        time.sleep(0.3)  # long enough for every other caller to arrive while this one builds
        return _entry(100, 7)

    def call() -> CachedContent:
        barrier.wait()
        return cache.get_or_build("k", build)

    with ThreadPoolExecutor(callers) as pool:
        results = list(pool.map(lambda _: call(), range(callers)))
    assert started.is_set() and len(calls) == 1
    assert len({id(result) for result in results}) == 1 and results[0].release_number == 7
    assert cache.get("k") is results[0] and cache.size == 100


def test_a_failed_build_keeps_nothing_and_the_next_call_builds_again() -> None:
    cache = ReleaseContentCache(1 << 20)
    attempts: list[int] = []

    def failing() -> CachedContent:
        attempts.append(1)
        raise RuntimeError("database went away")

    with pytest.raises(RuntimeError, match="went away"):
        cache.get_or_build("k", failing)
    assert cache.get("k") is None and cache.size == 0

    def working() -> CachedContent:
        attempts.append(2)
        return _entry(10, 3)

    assert cache.get_or_build("k", working).release_number == 3
    assert attempts == [1, 2] and cache.get("k") is not None and cache.size == 10
    assert cache.get_or_build("k", working).release_number == 3 and attempts == [1, 2]


def test_waiters_on_a_failed_build_build_again_themselves() -> None:
    cache = ReleaseContentCache(1 << 20)
    callers = 4
    barrier = threading.Barrier(callers)
    calls: list[int] = []
    lock = threading.Lock()

    def build() -> CachedContent:
        with lock:
            calls.append(1)
            first = len(calls) == 1
        time.sleep(0.2)
        if first:
            raise RuntimeError("first build fails")
        return _entry(10, 5)

    def call() -> CachedContent | None:
        barrier.wait()
        try:
            return cache.get_or_build("k", build)
        except RuntimeError:
            return None

    with ThreadPoolExecutor(callers) as pool:
        results = list(pool.map(lambda _: call(), range(callers)))
    assert results.count(None) == 1
    assert all(result is not None and result.release_number == 5 for result in results if result is not None)
    assert len(calls) == 2 and cache.get("k") is not None
