"""iso, ISO 8601 in UTC with milliseconds and Z, whatever it formatted before; parse_iso
back to the very millisecond."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from webhook_service.timeutil import iso, parse_iso

# 1970 to 9999, as ms since the epoch (strftime pads no year before 1000).
instants = st.integers(min_value=0, max_value=253_402_300_798_000)  # room for +1 s


def _expected(ms: int) -> str:
    moment = datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=(ms % 1000) * 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@given(st.lists(instants, min_size=1, max_size=20))
def test_iso_is_what_datetime_says_in_any_order_of_calls(times: list[int]) -> None:
    # Neighbours too: the same second twice, then the next ms, then the next second.
    for ms in times:
        for each in (ms, ms, ms + 1, ms + 1000, ms):
            assert iso(each) == _expected(each)
            assert parse_iso(iso(each)) == each


def test_iso_of_the_edges_of_a_second() -> None:
    assert iso(1_700_000_000_999) == "2023-11-14T22:13:20.999Z"
    assert iso(1_700_000_001_000) == "2023-11-14T22:13:21.000Z"
    assert iso(-1) == "1969-12-31T23:59:59.999Z"
    assert iso(0) == "1970-01-01T00:00:00.000Z"


def test_parse_iso_keeps_every_millisecond() -> None:
    # A float timestamp made 1.001 s 1000 ms.
    assert [parse_iso(iso(ms)) for ms in (1001, 1009, 1_700_000_000_001)] == [
        1001, 1009, 1_700_000_000_001,
    ]  # fmt: skip
    assert parse_iso("2023-11-14T22:13:20.123+01:00") == 1_699_996_400_123
    assert parse_iso("2023-11-14T22:13:20.123") == 1_700_000_000_123  # naive: UTC
