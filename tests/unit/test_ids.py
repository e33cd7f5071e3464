"""Time-sortable ids: order, time bounds, round trips, delivery ids, shape checks, and the
mark that says an id's bucket (with the epoch before which ids had none)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook_service.ids import (
    MARKS,
    delivery_event,
    delivery_id,
    delivery_tail,
    event_deliveries,
    id_bound,
    id_time_ms,
    looks_like,
    mark_of,
    new_id,
    random_mark,
    seq_tail,
    set_epoch,
    tail_endpoint,
    uid_mark,
)

MAX_MS = 2**48 - 1  # 48 bits of milliseconds: the year 10889
ms_values = st.integers(min_value=0, max_value=MAX_MS)
CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def test_an_id_is_prefix_underscore_and_26_crockford_chars() -> None:
    identifier = new_id("msg", 1_700_000_000_000)
    prefix, sep, body = identifier.partition("_")
    assert (prefix, sep) == ("msg", "_")
    assert len(body) == 26
    assert set(body) <= CROCKFORD


def test_ids_of_the_same_ms_differ() -> None:
    assert len({new_id("msg", 1_700_000_000_000) for _ in range(1000)}) == 1000


def test_ids_of_one_ms_sort_in_the_order_this_process_made_them() -> None:
    made = [new_id("msg", 1_700_000_000_001) for _ in range(1000)]
    assert sorted(made) == made
    # Another prefix, or another millisecond, starts from a random part of its own.
    assert new_id("evt", 1_700_000_000_001)[4:] != made[-1][4:]
    assert sorted([*made, new_id("msg", 1_700_000_000_002)])[-1] != made[-1]


def test_without_a_time_the_clock_is_used() -> None:
    before = time.time_ns() // 1_000_000
    identifier = new_id("msg")
    after = time.time_ns() // 1_000_000
    assert before <= id_time_ms(identifier) <= after


@given(st.lists(ms_values, min_size=2, max_size=30))
def test_sorting_ids_sorts_by_time(times: list[int]) -> None:
    ids = [new_id("evt", ms) for ms in times]
    assert [id_time_ms(i) for i in sorted(ids)] == sorted(times)


@given(ms_values, ms_values)
def test_a_later_ms_always_sorts_after(a: int, b: int) -> None:
    if a < b:
        assert new_id("evt", a) < new_id("evt", b)


@given(ms_values)
def test_id_time_ms_round_trips(ms: int) -> None:
    assert id_time_ms(new_id("evt", ms)) == ms


@pytest.mark.parametrize("ms", [0, 1, 31, 32, 1_700_000_000_000, MAX_MS])
def test_id_time_ms_round_trips_at_the_edges(ms: int) -> None:
    assert id_time_ms(new_id("evt", ms)) == ms
    assert id_time_ms(id_bound("evt", ms, upper=False)) == ms
    assert id_time_ms(id_bound("evt", ms, upper=True)) == ms


@given(ms_values)
def test_id_bound_brackets_every_id_of_that_ms(ms: int) -> None:
    low = id_bound("evt", ms, upper=False)
    high = id_bound("evt", ms, upper=True)
    for _ in range(20):
        assert low <= new_id("evt", ms) <= high
    if ms > 0:
        assert new_id("evt", ms - 1) < low
    if ms < MAX_MS:
        assert high < new_id("evt", ms + 1)


def test_bounds_are_the_extreme_random_parts() -> None:
    assert id_bound("evt", 5, upper=False).endswith("0" * 16)
    assert id_bound("evt", 5, upper=True).endswith("Z" * 16)
    assert looks_like(id_bound("evt", 5, upper=True), "evt")


def test_delivery_id_is_deterministic_and_distinct() -> None:
    event, endpoint = new_id("msg", 1000), new_id("ep", 2000)
    assert delivery_id(event, endpoint) == delivery_id(event, endpoint)
    assert delivery_id(event, endpoint) != delivery_id(event, new_id("ep", 2000))
    assert delivery_id(event, endpoint) != delivery_id(new_id("msg", 1000), endpoint)


def test_delivery_id_joins_the_two_bodies() -> None:
    event, endpoint = new_id("msg", 1000), new_id("ep", 2000)
    dlv = delivery_id(event, endpoint)
    assert dlv == "dlv_" + event[4:] + endpoint[3:]
    assert looks_like(dlv, "dlv")
    # A delivery sorts by its event's time: history of deliveries pages by event time.
    assert id_time_ms(dlv) == 1000


def test_delivery_id_matches_what_the_ingest_script_builds() -> None:
    # common.lua create_delivery, for an endpoint without a sequence number:
    # 'dlv_' .. string.sub(event_id, 5) .. string.sub(ep, 4)
    # (tests/integration/test_delivery_ids.py runs the script itself)
    event, endpoint = new_id("msg", 1), new_id("ep", 2)
    assert delivery_id(event, endpoint) == "dlv_" + event[5 - 1 :] + endpoint[4 - 1 :]


@pytest.mark.parametrize(
    ("seq", "tail"),
    [(1, "11"), (31, "1Z"), (32, "210"), (1023, "2ZZ"), (1024, "3100"), (2**40, "91" + "0" * 8)],
)
def test_seq_tail_is_digit_count_then_base32_digits(seq: int, tail: str) -> None:
    assert seq_tail(seq) == tail


def test_seq_tails_sort_as_their_numbers_and_after_any_endpoint_body() -> None:
    numbers = [1, 2, 9, 10, 31, 32, 33, 1000, 1023, 1024, 40_000, 2**30, 2**35]
    assert sorted(numbers, key=seq_tail) == numbers
    assert all(new_id("ep")[3:] < seq_tail(n) for n in numbers)
    with pytest.raises(ValueError):
        seq_tail(0)


def test_delivery_id_with_a_sequence_number_is_short_and_sorts_by_event_time() -> None:
    event, endpoint = new_id("msg", 1000), new_id("ep", 2000)
    dlv = delivery_id(event, endpoint, 5)
    assert dlv == "dlv_" + event[4:] + "15" and len(dlv) == 32
    assert looks_like(dlv, "dlv") and id_time_ms(dlv) == 1000
    assert delivery_id(event, endpoint, 5) != delivery_id(event, endpoint, 6)
    assert delivery_tail(dlv) == "15" and tail_endpoint("15") is None
    assert tail_endpoint(delivery_tail(delivery_id(event, endpoint))) == endpoint
    assert delivery_event(dlv) == delivery_event(delivery_id(event, endpoint)) == event
    later = new_id("msg", 1001)
    assert delivery_id(event, endpoint, 2**20) < delivery_id(later, endpoint, 1)
    assert delivery_id(event, endpoint) < delivery_id(event, endpoint, 1)


def test_event_deliveries_expand_tails_and_keep_whole_ids() -> None:
    event, endpoint = new_id("msg", 1000), new_id("ep", 2000)
    replayed = delivery_id(new_id("msg", 3000), endpoint, 7)
    dlvs = ",".join(["11", endpoint[3:], replayed])
    assert event_deliveries(event, dlvs) == [
        delivery_id(event, "", 1), delivery_id(event, endpoint), replayed,
    ]  # fmt: skip
    assert event_deliveries(event, None) == event_deliveries(event, "") == []


@pytest.mark.parametrize("prefix", ["msg", "ep", "evt", "x"])
def test_looks_like_accepts_fresh_ids(prefix: str) -> None:
    assert looks_like(new_id(prefix), prefix)


@pytest.mark.parametrize(
    ("identifier", "prefix"),
    [
        (new_id("msg", 1), "ep"),  # another prefix
        (new_id("msg", 1), "ms"),
        ("msg" + new_id("msg", 1)[3:].replace("_", "-"), "msg"),  # wrong separator
        (new_id("msg", 1)[:-1], "msg"),  # too short
        (new_id("msg", 1) + "0", "msg"),  # too long
        (new_id("msg", 1)[:-1] + "U", "msg"),  # U is not Crockford
        (new_id("msg", 1)[:-1] + "I", "msg"),
        (new_id("msg", 1)[:-1] + "a", "msg"),  # lower case
        (new_id("msg", 1)[:-1] + "!", "msg"),
        ("msg_", "msg"),
        ("", "msg"),
        ("msg_../../etc/passwd", "msg"),
    ],
)
def test_looks_like_rejects_anything_else(identifier: str, prefix: str) -> None:
    assert not looks_like(identifier, prefix)


def test_looks_like_rejects_the_wrong_kind_of_delivery_id() -> None:
    dlv = delivery_id(new_id("msg", 1), new_id("ep", 2))
    assert not looks_like(dlv, "msg")
    assert not looks_like(dlv[:-1], "dlv")
    short = delivery_id(new_id("msg", 1), "", 40)
    assert looks_like(short, "dlv") and not looks_like(short, "msg")
    assert not looks_like(short[:-1], "dlv")  # the count says one more digit
    assert not looks_like(short + "0", "dlv")
    assert not looks_like(short[:30] + "201", "dlv")  # a leading zero digit
    assert not looks_like(short[:30] + "1", "dlv")  # a count without digits
    assert not looks_like(short[:30] + "0", "dlv")


@given(ms_values, st.integers(min_value=0, max_value=MARKS - 1))
def test_an_id_carries_its_mark_right_after_its_time(ms: int, mark: int) -> None:
    identifier = new_id("msg", ms, mark=mark)
    assert (mark_of(identifier), id_time_ms(identifier)) == (mark, ms)
    assert looks_like(identifier, "msg")
    # A delivery's id starts with its event's body: its mark is the event's.
    assert mark_of(delivery_id(identifier, "ep_x", 3)) == mark


def test_ids_of_one_ms_and_mark_count_up_and_sort_by_time_across_marks() -> None:
    made = [new_id("msg", 1_700_000_000_003, mark=77) for _ in range(500)]
    assert sorted(made) == made and {mark_of(i) for i in made} == {77}
    later = new_id("msg", 1_700_000_000_004, mark=0)
    assert max(made) < later  # time first, whatever the marks
    with pytest.raises(ValueError, match="mark"):
        new_id("msg", 1, mark=MARKS)


def test_the_default_mark_is_0_and_a_random_one_is_in_range() -> None:
    assert mark_of(new_id("ep", 1_700_000_000_000)) == 0
    assert all(0 <= random_mark() < MARKS for _ in range(100))


def test_what_is_no_time_sortable_id_reads_as_mark_0() -> None:
    assert mark_of("app_default") == 0
    assert mark_of("ep_1") == 0 and mark_of("nothing") == 0 and mark_of("") == 0


@pytest.mark.parametrize("stranger", ["a", "_", " ", "+", "-", "I", "L", "O", "U", "\u0663"])
def test_a_character_outside_crockfords_alphabet_makes_no_id(stranger: str) -> None:
    # In the time or the mark, where int() in base 32 would read lowercase letters, signs,
    # underscores, spaces and other scripts' digits as digits.
    made = new_id("msg", 1_700_000_000_000, mark=45)
    for at in (4, 13, 15):
        broken = made[:at] + stranger + made[at + 1 :]
        assert mark_of(broken) == 0
        if at < 14:
            with pytest.raises(ValueError):
                id_time_ms(broken)


def test_an_id_older_than_the_epoch_has_no_mark_yet_reads_as_mark_0() -> None:
    old = new_id("msg", 1_700_000_000_000, mark=45)  # random characters stood there
    new = new_id("msg", 1_700_000_000_010, mark=45)
    try:
        set_epoch(1_700_000_000_005)
        assert (mark_of(old), mark_of(new)) == (0, 45)
    finally:
        set_epoch(0)
    assert mark_of(old) == 45


def test_a_uids_mark_is_stable_and_spread() -> None:
    assert uid_mark("acme") == uid_mark("acme")
    assert uid_mark("acme") == 197  # the same in every process and release
    assert len({uid_mark(f"tenant-{n}") for n in range(2000)}) > 800
