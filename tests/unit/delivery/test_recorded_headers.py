"""What an attempt's record keeps of a receiver's answer headers (transport.recorded_headers):
names lower-cased, repeated names joined, redacted before it is cut, and within 64 names
and 4 KiB whatever the receiver sends."""

from __future__ import annotations

import orjson
from aioresponses import aioresponses
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from tests.support.mock_http import CompatResponse
from webhook_service.delivery.ssrf import Guard
from webhook_service.delivery.transport import (
    OMITTED,
    RECORDED_HEADER_BYTES,
    RECORDED_HEADERS,
    RECORDED_VALUE_BYTES,
    AiohttpTransport,
    OutboundRequest,
    recorded_headers,
)

URL_OK = "https://receiver.example.com/hook"


def kept(name: str, value: str) -> str:
    return value


def size(headers: dict[str, str]) -> int:
    return sum(len(n.encode()) + len(v.encode()) for n, v in headers.items())


def within_bounds(headers: dict[str, str]) -> bool:
    return len(headers) <= RECORDED_HEADERS and size(headers) <= RECORDED_HEADER_BYTES


def test_an_ordinary_answer_is_kept_whole_with_names_lower_cased() -> None:
    answer = CIMultiDict(
        [("Content-Type", "application/json"), ("Date", "Tue, 01 Dec 2026 13:50:13 GMT"),
         ("Vary", "Accept"), ("VARY", "Origin"), ("X-Request-Id", "r-1")]
    )  # fmt: skip
    assert recorded_headers(answer, kept) == {
        "content-type": "application/json",
        "date": "Tue, 01 Dec 2026 13:50:13 GMT",
        "vary": "Accept, Origin",
        "x-request-id": "r-1",
    }


def test_too_many_names_keep_the_first_and_count_the_rest() -> None:
    answer = {f"X-H{i:03}": "v" for i in range(100)}
    record = recorded_headers(answer, kept)
    assert len(record) == RECORDED_HEADERS
    assert list(record)[:3] == ["x-h000", "x-h001", "x-h002"]
    assert record[OMITTED] == f"{100 - RECORDED_HEADERS + 1} headers"
    assert within_bounds(record)


def test_long_values_are_cut_and_marked_and_the_total_stays_within_4_kib() -> None:
    answer = {f"X-Big-{i}": "x" * 8000 for i in range(20)}
    record = recorded_headers(answer, kept)
    assert within_bounds(record)
    values = [v for n, v in record.items() if n != OMITTED]
    assert all(v.endswith("\u2026") and len(v.encode()) <= RECORDED_VALUE_BYTES for v in values)
    # Seven of 512 bytes, the eighth cut to the room left (4 KiB less the count's room).
    assert [len(v.encode()) for v in values] == [RECORDED_VALUE_BYTES] * 7 + [424]
    assert record[OMITTED] == "12 headers"


def test_one_long_policy_does_not_crowd_out_the_headers_after_it() -> None:
    answer = {"Content-Security-Policy": "default-src 'self' " * 400, "Retry-After": "30"}
    record = recorded_headers(answer, kept)
    assert record["retry-after"] == "30"
    assert len(record["content-security-policy"].encode()) == RECORDED_VALUE_BYTES
    assert OMITTED not in record


def test_ordinary_headers_are_kept_after_long_ones_and_the_order_is_the_receivers() -> None:
    padding = [(f"X-Padding-{i:02}", "p" * 2000) for i in range(20)]
    ordinary = [("Content-Type", "text/plain"), ("Date", "Tue, 01 Dec 2026 13:50:13 GMT")]
    record = recorded_headers(CIMultiDict(padding + ordinary), kept)
    assert within_bounds(record)
    assert record["content-type"] == "text/plain"
    assert list(record)[-3:] == ["content-type", "date", OMITTED]
    assert next(iter(record)) == "x-padding-00"


def test_a_name_too_long_for_the_room_left_is_dropped_and_a_short_one_after_it_kept() -> None:
    answer = {"X-" + "n" * 5000: "v", "X-Short": "ok"}
    assert recorded_headers(answer, kept) == {"x-short": "ok", OMITTED: "1 header"}


def test_a_cut_never_splits_a_character() -> None:
    record = recorded_headers({"X-Accents": "\u00e9" * 1000}, kept)
    value = record["x-accents"]
    assert value == "\u00e9" * 254 + "\u2026"  # 508 + 3 bytes: the next é would not fit
    assert len(value.encode()) <= RECORDED_VALUE_BYTES


def test_undecodable_bytes_become_replacement_characters_json_can_hold() -> None:
    # aiohttp hands header bytes over decoded with surrogate escapes.
    raw = b"caf\xe9 \xff".decode("utf-8", "surrogateescape")
    record = recorded_headers({"X-Latin-1": raw}, kept)
    assert record == {"x-latin-1": "caf\ufffd \ufffd"}
    orjson.dumps(record)


def test_redaction_comes_before_the_cut_and_sees_lower_cased_names() -> None:
    seen: list[str] = []

    def redact(name: str, value: str) -> str:
        seen.append(name)
        return "[redacted]" if name == "x-token" else value

    # Cut first, the end of a long secret would be kept, and a redaction by its whole value
    # would miss it.
    record = recorded_headers({"X-Token": "s" * 3000, "X-Other": "o"}, redact)
    assert record == {"x-token": "[redacted]", "x-other": "o"}
    assert seen == ["x-token", "x-other"]


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-ABC", min_size=1, max_size=300)
values = st.text(max_size=3000)


@given(st.lists(st.tuples(names, values), max_size=150))
def test_whatever_the_receiver_sends_the_record_is_within_bounds(
    lines: list[tuple[str, str]],
) -> None:
    record = recorded_headers(CIMultiDict(lines), kept)
    assert within_bounds(record)
    distinct = {n.lower() for n, _ in lines}
    dropped = int(record[OMITTED].split()[0]) if OMITTED in record else 0
    assert len(record) - (OMITTED in record) + dropped == len(distinct)
    orjson.dumps(record)


async def test_the_real_transport_hands_every_answer_line_over(http: aioresponses) -> None:
    cookies = CIMultiDict([("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("X-Id", "7")])
    http.post(URL_OK, status=200, headers=cookies, response_class=CompatResponse)
    transport = AiohttpTransport(Guard(), total_timeout=5, connect_timeout=1, body_limit=64)
    try:
        response = await transport.send(OutboundRequest(URL_OK, {}, b"{}"))
    finally:
        await transport.close()
    record = recorded_headers(response.headers, kept)
    assert record["set-cookie"] == "a=1, b=2"
    assert record["x-id"] == "7"
