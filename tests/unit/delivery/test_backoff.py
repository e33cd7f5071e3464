"""RetryPolicy.delay_after and parse_retry_after: the retry schedule, jitter and Retry-After."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook_service.delivery.backoff import (
    RETRY_AFTER_CAP,
    THROTTLE_STATUSES,
    RetryPolicy,
    parse_retry_after,
)

SCHEDULE = (0.0, 5.0, 300.0, 1800.0, 7200.0)
SEEDS = range(400)


def _jittered(policy: RetryPolicy, attempts_done: int, seed: int) -> float:
    """The plain scheduled delay the same seed gives, with no status or error."""
    delay = policy.delay_after(attempts_done, rng=random.Random(seed))
    assert delay is not None
    return delay


# -- jitter -------------------------------------------------------------------------------


@pytest.mark.parametrize("jitter", [0.0, 0.1, 0.2, 0.5])
def test_every_delay_is_within_jitter_of_its_schedule_entry(jitter: float) -> None:
    policy = RetryPolicy(SCHEDULE, jitter=jitter)
    for seed in SEEDS:
        rng = random.Random(seed)
        for attempts_done, base in enumerate(SCHEDULE):
            delay = policy.delay_after(attempts_done, rng=rng)
            assert delay is not None
            assert base * (1 - jitter) <= delay <= base * (1 + jitter)


def test_jitter_spreads_delays_across_both_sides_of_the_entry() -> None:
    policy = RetryPolicy(SCHEDULE, jitter=0.2)
    delays = [_jittered(policy, 2, seed) for seed in SEEDS]
    # 400 uniform draws over 240..360 reach close to both ends and both sides of 300.
    assert min(delays) < 300 * 0.85
    assert max(delays) > 300 * 1.15
    assert len(set(delays)) > 300


def test_the_same_seed_gives_the_same_delay() -> None:
    policy = RetryPolicy(SCHEDULE, jitter=0.2)
    assert _jittered(policy, 3, 42) == _jittered(policy, 3, 42)
    assert _jittered(policy, 3, 42) != _jittered(policy, 3, 43)


def test_zero_jitter_gives_the_schedule_exactly() -> None:
    policy = RetryPolicy(SCHEDULE, jitter=0.0)
    assert [policy.delay_after(i) for i in range(len(SCHEDULE))] == list(SCHEDULE)


def test_without_an_rng_the_module_random_is_used_and_stays_in_bounds() -> None:
    policy = RetryPolicy(SCHEDULE, jitter=0.2)
    for _ in range(200):
        delay = policy.delay_after(1)
        assert delay is not None
        assert 4.0 <= delay <= 6.0


# -- end of the schedule --------------------------------------------------------------------


@pytest.mark.parametrize("attempts_done", [len(SCHEDULE), len(SCHEDULE) + 1, 100])
def test_none_once_the_schedule_is_spent(attempts_done: int) -> None:
    policy = RetryPolicy(SCHEDULE)
    assert policy.delay_after(attempts_done, rng=random.Random(0)) is None
    # Nothing a receiver says buys another attempt.
    assert policy.delay_after(attempts_done, status=429, retry_after=10.0) is None
    assert policy.delay_after(attempts_done, error="timeout") is None


def test_the_last_entry_still_gives_a_delay() -> None:
    policy = RetryPolicy(SCHEDULE, jitter=0.0)
    assert policy.delay_after(len(SCHEDULE) - 1) == SCHEDULE[-1]


def test_an_empty_schedule_never_retries() -> None:
    assert RetryPolicy(()).delay_after(0) is None


# -- throttle floor ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"), [(429, None), (None, "timeout"), (429, "timeout"), (503, "timeout")]
)
def test_429_and_timeouts_wait_at_least_the_throttle_floor(
    status: int | None, error: str | None
) -> None:
    policy = RetryPolicy(SCHEDULE, jitter=0.2, throttle_floor=60.0)
    for seed in range(50):
        # 5 s scheduled, but an overloaded receiver gets the full minute.
        assert policy.delay_after(1, status=status, error=error, rng=random.Random(seed)) == 60.0


@pytest.mark.parametrize(("status", "error"), [(429, None), (None, "timeout")])
def test_the_floor_does_not_shorten_a_longer_scheduled_delay(
    status: int | None, error: str | None
) -> None:
    policy = RetryPolicy(SCHEDULE, jitter=0.2, throttle_floor=60.0)
    for seed in range(50):
        expected = _jittered(policy, 2, seed)  # 240..360 s, above the floor
        got = policy.delay_after(2, status=status, error=error, rng=random.Random(seed))
        assert got == expected


@pytest.mark.parametrize(
    ("status", "error"),
    [(500, None), (503, None), (404, None), (None, "connection"), (None, "destination_blocked")],
)
def test_other_failures_get_no_floor(status: int | None, error: str | None) -> None:
    policy = RetryPolicy(SCHEDULE, jitter=0.2, throttle_floor=60.0)
    for seed in range(50):
        got = policy.delay_after(1, status=status, error=error, rng=random.Random(seed))
        assert got == _jittered(policy, 1, seed)
        assert got is not None and got <= 6.0


# -- Retry-After ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(THROTTLE_STATUSES))
def test_retry_after_is_clamped_between_the_delay_and_twice_it(status: int) -> None:
    # A zero floor isolates the Retry-After rule from the 429 floor.
    policy = RetryPolicy(SCHEDULE, jitter=0.2, throttle_floor=0.0)
    for seed in range(100):
        scheduled = _jittered(policy, 2, seed)

        def with_header(value: float, seed: int = seed) -> float | None:
            return policy.delay_after(2, status=status, retry_after=value, rng=random.Random(seed))

        # Shorter than our schedule: we keep our own pace.
        assert with_header(1.0) == scheduled
        assert with_header(0.0) == scheduled
        # Inside the window: honoured as given.
        assert with_header(scheduled * 1.5) == scheduled * 1.5
        # Longer than the cap: clamped to twice our schedule, no more.
        assert with_header(10 * scheduled) == RETRY_AFTER_CAP * scheduled
        assert with_header(float("inf")) == RETRY_AFTER_CAP * scheduled


def test_retry_after_cap_is_twice_the_schedule() -> None:
    assert RETRY_AFTER_CAP == 2.0
    policy = RetryPolicy((100.0,), jitter=0.0, throttle_floor=0.0)
    assert policy.delay_after(0, status=503, retry_after=1_000_000.0) == 200.0
    assert policy.delay_after(0, status=503, retry_after=150.0) == 150.0
    assert policy.delay_after(0, status=503, retry_after=50.0) == 100.0


def test_retry_after_on_429_stacks_on_the_floor() -> None:
    policy = RetryPolicy((0.0, 5.0), jitter=0.0, throttle_floor=60.0)
    # Floor first (60), then the header may stretch that up to twice it.
    assert policy.delay_after(1, status=429, retry_after=90.0) == 90.0
    assert policy.delay_after(1, status=429, retry_after=3600.0) == 120.0
    assert policy.delay_after(1, status=429, retry_after=10.0) == 60.0


@pytest.mark.parametrize("status", [None, 200, 301, 400, 404, 408, 410, 500, 501, 505])
def test_retry_after_is_ignored_for_other_statuses(status: int | None) -> None:
    policy = RetryPolicy(SCHEDULE, jitter=0.2, throttle_floor=0.0)
    for seed in range(50):
        got = policy.delay_after(2, status=status, retry_after=10_000.0, rng=random.Random(seed))
        assert got == _jittered(policy, 2, seed)


def test_a_zero_schedule_entry_is_not_stretched_by_retry_after() -> None:
    # Twice zero is zero: a header alone cannot park the immediate first retry.
    policy = RetryPolicy((0.0, 5.0), jitter=0.2, throttle_floor=0.0)
    assert policy.delay_after(0, status=503, retry_after=3600.0) == 0.0


# -- property ---------------------------------------------------------------------------------

schedules = st.lists(
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False), min_size=0, max_size=10
)


@given(
    schedule=schedules,
    jitter=st.floats(min_value=0.0, max_value=0.99),
    floor=st.floats(min_value=0.0, max_value=1e4),
    attempts_done=st.integers(min_value=0, max_value=12),
    status=st.sampled_from([None, 200, 404, 429, 500, 502, 503, 504]),
    error=st.sampled_from([None, "timeout", "connection"]),
    retry_after=st.none() | st.floats(min_value=0.0, max_value=1e9, allow_nan=False),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_delay_after_stays_within_its_documented_bounds(
    schedule: list[float],
    jitter: float,
    floor: float,
    attempts_done: int,
    status: int | None,
    error: str | None,
    retry_after: float | None,
    seed: int,
) -> None:
    policy = RetryPolicy(schedule, jitter=jitter, throttle_floor=floor)
    delay = policy.delay_after(
        attempts_done,
        status=status,
        error=error,
        retry_after=retry_after,
        rng=random.Random(seed),
    )
    if attempts_done >= len(schedule):
        assert delay is None
        return
    assert delay is not None
    base = schedule[attempts_done]
    throttled = status == 429 or error == "timeout"
    low = max(base * (1 - jitter), floor if throttled else 0.0)
    high = max(base * (1 + jitter), floor if throttled else 0.0)
    if retry_after is not None and status in THROTTLE_STATUSES:
        high *= RETRY_AFTER_CAP
    tolerance = 1e-9 * max(1.0, high)
    assert low - tolerance <= delay <= high + tolerance
    if throttled:
        assert delay >= floor


# -- parse_retry_after ------------------------------------------------------------------------

NOW = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0", 0.0), ("1", 1.0), ("120", 120.0), (" 120 ", 120.0), ("86400", 86400.0)],
)
def test_delta_seconds(value: str, expected: float) -> None:
    assert parse_retry_after(value, NOW.timestamp()) == expected


def test_http_date_in_the_future_gives_the_seconds_until_it() -> None:
    later = format_datetime(NOW + timedelta(seconds=90), usegmt=True)
    assert later.endswith("GMT")
    assert parse_retry_after(later, NOW.timestamp()) == pytest.approx(90.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", NOW.timestamp()) == 120.0


def test_http_date_with_a_numeric_offset() -> None:
    # 09:30 at +0200 is 07:30 UTC.
    assert parse_retry_after("Wed, 21 Oct 2015 09:30:00 +0200", NOW.timestamp()) == 120.0


@pytest.mark.parametrize(
    "value", ["Wed, 21 Oct 2015 07:27:59 GMT", "Thu, 01 Jan 1970 00:00:00 GMT"]
)
def test_http_date_in_the_past_gives_zero(value: str) -> None:
    assert parse_retry_after(value, NOW.timestamp()) == 0.0


def test_http_date_now_gives_zero() -> None:
    assert parse_retry_after(format_datetime(NOW, usegmt=True), NOW.timestamp()) == 0.0


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        "soon",
        "-5",
        "1.5",
        "12abc",
        "0x10",
        "1e3",
        "Wed, 32 Oct 2015 07:28:00 GMT",
        "Wed, 21 Oct 99999 07:28:00 GMT",
        "Wed, 21 Foo 2015 07:28:00 GMT",
    ],
)
def test_garbage_gives_none(value: str | None) -> None:
    assert parse_retry_after(value, NOW.timestamp()) is None


@pytest.mark.parametrize("value", ["²", "1²", "③"])
def test_non_ascii_digit_lookalikes_give_none(value: str) -> None:
    # aiohttp decodes header bytes as UTF-8, so a receiver can send these.
    assert parse_retry_after(value, NOW.timestamp()) is None


@given(st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=40))
def test_any_ascii_header_parses_to_none_or_a_non_negative_delay(value: str) -> None:
    result = parse_retry_after(value, NOW.timestamp())
    assert result is None or result >= 0.0


@given(st.integers(min_value=0, max_value=10**12))
def test_any_delta_seconds_round_trips(seconds: int) -> None:
    assert parse_retry_after(str(seconds), NOW.timestamp()) == float(seconds)


@given(st.integers(min_value=-(10**8), max_value=10**8))
def test_any_http_date_gives_its_distance_from_now_or_zero(offset: int) -> None:
    header = format_datetime(NOW + timedelta(seconds=offset), usegmt=True)
    assert parse_retry_after(header, NOW.timestamp()) == float(max(0, offset))
