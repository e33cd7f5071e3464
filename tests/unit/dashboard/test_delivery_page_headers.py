"""A delivery page shows each attempt's request and response headers, escaped."""

from __future__ import annotations

from webhook_service.dashboard.delivery_pages import attempt_log

HOSTILE = "\"><script>alert('x')</script>"


def _delivery(**attempt: object) -> dict[str, object]:
    return {
        "attempt_log": [
            {
                "number": 1,
                "started_at": "2026-12-01T13:50:13.000Z",
                "duration_ms": 12,
                "status_code": 503,
                "error": None,
                "response_body": "busy",
                "request_headers": {"webhook-id": "msg_1", "authorization": "[redacted]"},
                "response_headers": {"retry-after": "30", "x-" + "<b>": HOSTILE},
                **attempt,
            }
        ]
    }


def test_both_header_sets_are_shown_per_attempt_and_escaped() -> None:
    html = attempt_log(_delivery())
    assert "<summary>2 sent</summary>" in html
    assert "<summary>2 received</summary>" in html
    assert "<dt>webhook-id</dt><dd>msg_1</dd>" in html
    assert "<dt>authorization</dt><dd>[redacted]</dd>" in html
    assert "<dt>retry-after</dt><dd>30</dd>" in html
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html and "x-&lt;b&gt;" in html


def test_an_attempt_without_an_answer_says_so() -> None:
    html = attempt_log(_delivery(status_code=None, error="timeout", response_headers={}))
    assert "none received" in html
    assert "<summary>2 sent</summary>" in html
