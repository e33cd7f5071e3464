"""History filters: what a delivery filter keeps, and the JSON a bulk job stores it as."""

from __future__ import annotations

from webhook_service.history.filters import DeliveryFilter
from webhook_service.store.deliveries import DeliveryRecord
from webhook_service.store.states import Status


def _record(
    *,
    status: Status = "failed",
    attempts: int = 3,
    last_class: str | None = "5xx",
    application: str | None = "app_1",
) -> DeliveryRecord:
    return DeliveryRecord(
        id="dlv_1", event_id="msg_1", endpoint_id="ep_1", event_type="a.b", status=status,
        attempts=attempts, next_at_ms=None, created_ms=0, updated_ms=0, last_code=503,
        last_error=None, last_class=last_class, application=application,
    )  # fmt: skip


def test_matches_every_filter_given() -> None:
    record = _record()
    assert DeliveryFilter().matches(record)
    assert DeliveryFilter(status_class="5xx", attempts_min=3, attempts_max=3).matches(record)
    assert not DeliveryFilter(status_class="4xx").matches(record)
    assert not DeliveryFilter(attempts_min=4).matches(record)
    assert not DeliveryFilter(attempts_max=2).matches(record)
    assert not DeliveryFilter(status_class="2xx").matches(_record(last_class=None))
    assert DeliveryFilter(endpoint_id="ep_1", event_type="a.b", event_id="msg_1").matches(record)
    assert not DeliveryFilter(endpoint_id="ep_2").matches(record)
    assert not DeliveryFilter(event_id="msg_2").matches(record)
    assert not DeliveryFilter(status="pending").matches(record)
    done = _record(status="succeeded", last_class="2xx", attempts=1)
    assert DeliveryFilter(status="succeeded", status_class="2xx", attempts_max=1).matches(done)


def test_what_never_changes_is_told_apart() -> None:
    # A pending record that fails these fails whatever Redis says of it now: the reader
    # looks no further.
    record = _record(status="pending")
    assert DeliveryFilter(endpoint_id="ep_1", status="failed").matches_for_good(record)
    assert not DeliveryFilter(endpoint_id="ep_2").matches_for_good(record)
    assert not DeliveryFilter(event_type="x.y").matches_for_good(record)
    assert not DeliveryFilter(event_id="msg_2").matches_for_good(record)
    assert DeliveryFilter(application="app_1").matches_for_good(record)
    assert not DeliveryFilter(application="app_2").matches_for_good(record)


def test_an_operational_delivery_matches_no_application() -> None:
    # None is every application's, and operational deliveries too: the operator's view.
    ops = _record(application=None)
    assert DeliveryFilter().matches(ops)
    assert not DeliveryFilter(application="app_1").matches(ops)


def test_the_time_range_is_left_to_the_query() -> None:
    # The query's id range answers it; a record's time never changes, so the reader need
    # not look again after it shows a record as Redis has it now.
    assert DeliveryFilter(since_ms=10, until_ms=20).matches(_record())


def test_a_filter_survives_the_json_a_bulk_job_stores_it_as() -> None:
    query = DeliveryFilter(
        endpoint_id="ep_1", status_class="timeout", attempts_min=2, since_ms=5, until_ms=9
    )
    assert DeliveryFilter.from_json(query.to_json()) == query
    assert DeliveryFilter.from_json(DeliveryFilter().to_json()) == DeliveryFilter()
    mine = DeliveryFilter(application="app_1", status="failed")
    assert DeliveryFilter.from_json(mine.to_json()) == mine


def test_a_filter_stored_before_applications_means_every_application() -> None:
    stored = '{"endpoint_id":"ep_1","status":"failed","since_ms":null,"until_ms":null}'
    assert DeliveryFilter.from_json(stored) == DeliveryFilter(endpoint_id="ep_1", status="failed")
