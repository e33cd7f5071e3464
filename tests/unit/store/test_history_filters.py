"""History filters: which indexes a query may read, what it keeps, and its id range."""

from __future__ import annotations

import dataclasses

import orjson

from webhook_service.ids import id_bound
from webhook_service.store import keys
from webhook_service.store.deliveries import DeliveryRecord
from webhook_service.store.history import DeliveryFilter, EventFilter, EventSummary, TimeRange
from webhook_service.store.states import Status


def _record(
    *, status: Status = "failed", attempts: int = 3, last_class: str | None = "5xx"
) -> DeliveryRecord:
    return DeliveryRecord(
        id="dlv_1", event_id="msg_1", endpoint_id="ep_1", event_type="a.b", status=status,
        attempts=attempts, next_at_ms=None, created_ms=0, updated_ms=0, last_code=503,
        last_error=None, last_class=last_class,
    )  # fmt: skip


def test_no_filter_reads_the_whole_index() -> None:
    assert DeliveryFilter().sources([]) == [(keys.DELIVERIES_INDEX,)]
    assert EventFilter().sources() == [(keys.EVENTS_INDEX,)]


def test_endpoint_pairs_have_their_own_indexes_first() -> None:
    query = DeliveryFilter(endpoint_id="ep_1", status="failed", status_class="5xx")
    assert query.sources([])[:3] == [
        (keys.deliveries_by_endpoint_status("ep_1", "failed"),),
        (keys.deliveries_by_endpoint_class("ep_1", "5xx"),),
        (keys.deliveries_by_endpoint("ep_1"),),
    ]
    assert (keys.deliveries_by_status("failed"),) in query.sources([])
    assert (keys.deliveries_by_class("5xx"),) in query.sources([])


def test_an_attempt_range_reads_the_union_of_its_counts() -> None:
    query = DeliveryFilter(attempts_min=2, attempts_max=4)
    assert query.sources([0, 1, 2, 3, 4, 5, 8]) == [
        tuple(keys.deliveries_by_attempts(n) for n in (2, 3, 4))
    ]
    assert DeliveryFilter(attempts_min=6).sources([1, 8, 6]) == [
        (keys.deliveries_by_attempts(6), keys.deliveries_by_attempts(8))
    ]
    # No delivery has a count in range: an empty source, an empty page.
    assert DeliveryFilter(attempts_max=0).sources([1, 2]) == [()]


def test_unindexed_values_offer_no_index_of_their_own() -> None:
    # The dense values (keys.UNINDEXED_*) have no index: a broader one answers, and the
    # filter is applied while reading.
    assert "succeeded" in keys.UNINDEXED_STATUSES
    assert "2xx" in keys.UNINDEXED_CLASSES
    assert 1 in keys.UNINDEXED_ATTEMPTS
    everything = [(keys.DELIVERIES_INDEX,)]
    assert DeliveryFilter(status="succeeded").sources([]) == everything
    assert DeliveryFilter(status_class="2xx").sources([]) == everything
    assert DeliveryFilter(attempts_min=1, attempts_max=1).sources([0, 1, 2]) == everything
    assert DeliveryFilter(attempts_max=3).sources([0, 1, 2, 3]) == everything
    query = DeliveryFilter(endpoint_id="ep_1", status="succeeded", status_class="2xx")
    assert query.sources([]) == [(keys.deliveries_by_endpoint("ep_1"),)]
    query = DeliveryFilter(event_type="a.b", status="succeeded", attempts_max=1)
    assert query.sources([1]) == [(keys.deliveries_by_type("a.b"),)]
    # A sparse value beside an indexed one: the indexed one's index still counts.
    query = DeliveryFilter(endpoint_id="ep_1", status="failed", status_class="2xx")
    assert query.sources([]) == [
        (keys.deliveries_by_endpoint_status("ep_1", "failed"),),
        (keys.deliveries_by_endpoint("ep_1"),),
        (keys.deliveries_by_status("failed"),),
    ]
    # A range without the unindexed count reads its counts' union, never count 1's.
    assert DeliveryFilter(attempts_min=2).sources([0, 1, 2, 5]) == [
        (keys.deliveries_by_attempts(2), keys.deliveries_by_attempts(5))
    ]
    assert DeliveryFilter(attempts_max=0).sources([0, 1]) == [(keys.deliveries_by_attempts(0),)]
    # Filtering while reading still tells them apart.
    done = _record(status="succeeded", last_class="2xx", attempts=1)
    assert DeliveryFilter(status="succeeded", status_class="2xx", attempts_max=1).matches(done)
    assert not DeliveryFilter(status="succeeded").matches(_record())
    assert not DeliveryFilter(attempts_min=1, attempts_max=1).matches(_record())


def test_matches_every_filter_given() -> None:
    record = _record()
    assert DeliveryFilter(status_class="5xx", attempts_min=3, attempts_max=3).matches(record)
    assert not DeliveryFilter(status_class="4xx").matches(record)
    assert not DeliveryFilter(attempts_min=4).matches(record)
    assert not DeliveryFilter(attempts_max=2).matches(record)
    assert not DeliveryFilter(status_class="2xx").matches(_record(last_class=None))
    assert DeliveryFilter(endpoint_id="ep_1", event_type="a.b").matches(record)
    assert not DeliveryFilter(endpoint_id="ep_2").matches(record)


def test_event_filter_matches_type_and_key() -> None:
    event = EventSummary("msg_1", "a.b", 0, "key_1", 2, False)
    assert EventFilter(event_type="a.b", key_id="key_1").matches(event)
    assert not EventFilter(key_id="key_2").matches(event)
    both = EventFilter(event_type="a.b", key_id="key_1").sources()
    assert both == [(keys.events_by_type("a.b"),), (keys.events_by_key("key_1"),)]


def test_a_filter_survives_the_json_a_bulk_job_stores_it_as() -> None:
    query = DeliveryFilter(endpoint_id="ep_1", status_class="timeout", attempts_min=2)
    raw = orjson.dumps(dataclasses.asdict(query))
    assert DeliveryFilter(**orjson.loads(raw)) == query


def test_time_range_bounds_and_cursor() -> None:
    assert TimeRange().lex_bounds("dlv", None) == ("+", "-")
    upper, lower = TimeRange(1000, 2000).lex_bounds("dlv", None)
    assert upper == "[" + id_bound("dlv", 2000, upper=True) + "~"
    assert lower == "[" + id_bound("dlv", 1000, upper=False)
    # A cursor below the range's top starts the page below the cursor, exclusively.
    cursor = id_bound("dlv", 1500, upper=False)
    assert TimeRange(1000, 2000).lex_bounds("dlv", cursor)[0] == "(" + cursor
    # A cursor above the range's top changes nothing.
    later = id_bound("dlv", 9000, upper=False)
    assert TimeRange(1000, 2000).lex_bounds("dlv", later)[0] == upper
    assert TimeRange(10, 20).covers(10) and TimeRange(10, 20).covers(20)
    assert not TimeRange(10, 20).covers(21) and not TimeRange(since_ms=10).covers(9)
