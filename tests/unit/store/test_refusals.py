"""The store's refusals: the classifier on the forms no Valkey 9 gives (the real ones are
provoked in tests/integration/test_refusal_classes.py), the once-a-minute line, the back-off."""

from __future__ import annotations

import logging

import pytest
import redis.exceptions
from redis._parsers.base import BaseParser

from webhook_service.store.refusals import Backoff, Refusal, RefusalLog, classify, describe


def error_reply(text: str) -> redis.exceptions.RedisError:
    """The exception redis-py raises for an error reply of this text."""
    error: redis.exceptions.RedisError = BaseParser.parse_error(text)  # type: ignore[no-untyped-call]
    return error


# Redis 6 wraps an error raised by redis.call() inside a script behind "ERR Error running
# script"; the code it carries is somewhere inside.
WRAPPED = (
    "ERR Error running script (call to f_0a4c1e6b2c1d): @user_script:12: @user_script: 12: "
    "-OOM command not allowed when used memory > 'maxmemory'."
)


@pytest.mark.parametrize(
    ("reply", "refusal"),
    [
        (WRAPPED, Refusal.OUT_OF_MEMORY),
        ("ERR user_script:1: MISCONF Errors writing to the AOF file: No space left on device",
         Refusal.DISK_ERROR),
        ("ERR Error running script (call to f_ab): @user_script:3: -READONLY You can't write "
         "against a read only replica.", Refusal.READ_ONLY),
    ],
)  # fmt: skip
def test_a_code_inside_a_wrapped_script_error_is_found(reply: str, refusal: Refusal) -> None:
    assert classify(error_reply(reply)) is refusal


@pytest.mark.parametrize(
    "reply",
    [
        "BUSYKEY Target key name already exists.",
        "WRONGTYPE Operation against a key holding the wrong kind of value",
        "NOSCRIPT No matching script. Please use EVAL.",
        "ERR the server is busy loading its own cache",  # the words, not the codes
        "ERR user_script:4: Script attempted to access nonexistent global variable 'OOMS'",
    ],
)
def test_what_waiting_does_not_cure_is_no_refusal(reply: str) -> None:
    assert classify(error_reply(reply)) is None


def test_non_store_errors_are_no_refusal() -> None:
    assert classify(ValueError("OOM")) is None
    assert classify(redis.exceptions.DataError("OOM")) is None


def test_describe_gives_back_the_code_redis_py_cut_off() -> None:
    oom = error_reply("OOM command not allowed when used memory > 'maxmemory'.")
    assert describe(oom) == "OOM command not allowed when used memory > 'maxmemory'."
    assert describe(error_reply(WRAPPED)) == WRAPPED[:200]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_warning_per_cause_a_minute_with_what_was_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    tally = RefusalLog(clock=clock)
    oom = error_reply("OOM command not allowed when used memory > 'maxmemory'.")
    misconf = error_reply("MISCONF Errors writing to the AOF file")
    with caplog.at_level(logging.WARNING, "webhook_service.store.refusals"):
        for _ in range(5):
            tally.note(Refusal.OUT_OF_MEMORY, oom, "serving POST /v1/events")
        tally.note(Refusal.DISK_ERROR, misconf, "recording an attempt")
        clock.now += 59
        tally.note(Refusal.OUT_OF_MEMORY, oom, "serving POST /v1/events")
        clock.now += 1
        tally.note(Refusal.OUT_OF_MEMORY, oom, "leasing deliveries")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("store refusal (out-of-memory) while serving POST /v1/events")
    assert lines[0].endswith(": OOM command not allowed when used memory > 'maxmemory'.")
    assert lines[1].startswith("store refusal (disk-error) while recording an attempt")
    assert lines[2].startswith("store refusal (out-of-memory) while leasing deliveries")
    assert lines[2].endswith("; 5 more of this cause since the last such line")
    assert tally.counts() == {Refusal.OUT_OF_MEMORY: 7, Refusal.DISK_ERROR: 1}


def test_backoff_doubles_to_its_cap_with_jitter_and_starts_over() -> None:
    lowest = Backoff(first=0.1, cap=5.0, jitter=lambda: 0.0)
    highest = Backoff(first=0.1, cap=5.0, jitter=lambda: 1.0)
    low = [lowest.next() for _ in range(10)]
    high = [highest.next() for _ in range(10)]
    assert high == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0, 5.0])
    assert low == pytest.approx([h / 2 for h in high])
    highest.reset()
    assert highest.next() == pytest.approx(0.1)


def test_backoff_never_overflows_however_long_the_outage() -> None:
    backoff = Backoff(first=0.1, cap=5.0, jitter=lambda: 1.0)
    for _ in range(10_000):
        wait = backoff.next()
    assert wait == 5.0
