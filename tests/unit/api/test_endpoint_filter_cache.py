"""api/endpoint_filters.py FilterCache: one read per application until told to read
again, the newer of two concurrent reads kept, a bounded number of applications, and a
stored filter that no longer parses let through rather than refusing everything."""

from __future__ import annotations

from typing import cast

import pytest

from webhook_service.api.endpoint_filters import FilterCache
from webhook_service.filters import FilterEvent
from webhook_service.store.endpoints import AppFilters, EndpointStore


class FakeStore:
    def __init__(self) -> None:
        self.stored: dict[str, AppFilters] = {}
        self.reads: list[str] = []

    async def filters(self, application: str) -> AppFilters:
        self.reads.append(application)
        return self.stored.get(application, AppFilters(0, ()))


def _cache(store: FakeStore, most: int = 10) -> FilterCache:
    return FilterCache(cast(EndpointStore, store), most)


async def test_read_once_then_on_demand() -> None:
    store = FakeStore()
    store.stored["app_a"] = AppFilters(3, (("ep_1", '{"data.n":{"$gt":1}}'),))
    cache = _cache(store)
    first = await cache.of("app_a")
    assert first.version == 3 and [e for e, _ in first.filters] == ["ep_1"]
    assert first.refused(FilterEvent("t", {"n": 0})) == ("ep_1",)
    assert first.refused(FilterEvent("t", {"n": 2})) == ()
    assert await cache.of("app_a") is first and store.reads == ["app_a"]
    store.stored["app_a"] = AppFilters(4, ())
    assert (await cache.of("app_a", reload=True)).version == 4
    assert store.reads == ["app_a", "app_a"]


async def test_an_older_read_does_not_replace_a_newer_one() -> None:
    store = FakeStore()
    cache = _cache(store)
    store.stored["app_a"] = AppFilters(5, ())
    await cache.of("app_a")
    store.stored["app_a"] = AppFilters(4, ())  # a read that began before the one above
    assert (await cache.of("app_a", reload=True)).version == 5


async def test_bounded_least_recently_used_first() -> None:
    store = FakeStore()
    cache = _cache(store, most=2)
    for app in ("app_a", "app_b", "app_a", "app_c"):
        await cache.of(app)
    await cache.of("app_a")
    await cache.of("app_b")  # app_b went when app_c came: read again
    assert store.reads == ["app_a", "app_b", "app_c", "app_b"]


async def test_an_unparsable_stored_filter_lets_events_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FakeStore()
    store.stored["app_a"] = AppFilters(1, (("ep_1", '{"$gt": 1}'), ("ep_2", "not json")))
    loaded = await _cache(store).of("app_a")
    assert loaded.filters == () and loaded.refused(FilterEvent("t", {})) == ()
    assert "ep_1" in caplog.text and "ep_2" in caplog.text
