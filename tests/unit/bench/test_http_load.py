"""The load generator's response framing and the statistics every bench figure goes through."""

from __future__ import annotations

import math

import pytest

from bench.http_load import _parse, build_request
from bench.report import Row
from bench.stats import percentile, spread


def test_a_request_carries_its_length_and_headers() -> None:
    raw = build_request("POST", "/v1/events", 8000, b'{"a": 1}', {"Authorization": "Bearer k"})
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"POST /v1/events HTTP/1.1",
        b"Host: 127.0.0.1:8000",
        b"Authorization: Bearer k",
        b"Content-Length: 8",
    ]
    assert body == b'{"a": 1}'


def test_a_response_is_complete_only_once_its_body_is_in() -> None:
    response = (
        b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n"
    )
    assert _parse(bytearray(response + b'{"id": ')) is None
    assert _parse(bytearray(response + b'{"id": 1}')) == (202, b'{"id": 1}', len(response) + 9)


def test_back_to_back_responses_are_taken_one_at_a_time() -> None:
    first = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    second = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"
    buffer = bytearray(first + second)
    status, body, used = _parse(buffer) or (0, b"", 0)
    assert (status, body) == (200, b"ok")
    del buffer[:used]
    assert _parse(buffer) == (503, b"", len(second))


def test_a_response_without_a_length_has_no_body() -> None:
    raw = b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n"
    assert _parse(bytearray(raw)) == (204, b"", len(raw))


def test_a_chunked_response_is_refused_rather_than_misread() -> None:
    with pytest.raises(ValueError, match="chunked"):
        _parse(bytearray(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n"))


def test_percentile_is_a_value_that_was_observed() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile([7.0], 99) == 7
    assert math.isnan(percentile([], 50))


def test_spread_reports_the_median_and_range_and_skips_failed_runs() -> None:
    result = spread([3.0, math.nan, 1.0, 2.0])
    assert (result["median"], result["low"], result["high"]) == (2.0, 1.0, 3.0)
    assert len(result["runs"]) == 4


def test_a_ratio_above_one_always_means_ours_is_better() -> None:
    fast, slow = spread([10.0]), spread([40.0])
    assert Row("s", "latency", fast, "ms", "lower", slow).ratio == 4
    assert Row("s", "rate", slow, "/s", "higher", fast).ratio == 4
    assert Row("s", "rate", slow, "/s", "higher", None).ratio is None
