"""Which form posts the dashboard takes as its own: origin and token checks."""

from __future__ import annotations

from aiohttp.test_utils import make_mocked_request

from webhook_service.dashboard.session import Session, new_session, same_origin, valid_form_token


def post(headers: dict[str, str]) -> bool:
    request = make_mocked_request(
        "POST", "/dashboard/login", headers={"Host": "dash.test:8000", **headers}
    )
    return same_origin(request)


def test_same_origin_takes_our_origin_only() -> None:
    assert post({"Origin": "http://dash.test:8000"})
    assert not post({"Origin": "http://evil.test"})
    assert not post({"Origin": "http://dash.test:8001"})
    # A TLS-terminating proxy: the browser's origin is https, this process sees http.
    assert post({"Origin": "https://dash.test:8000"})
    assert not post({"Origin": "ftp://dash.test:8000"})
    assert not post({"Origin": "null"})  # sandboxed frames, data: URLs


def test_without_origin_fetch_metadata_decides() -> None:
    assert post({})  # no browser signals at all: a client that has no cookie anyway
    assert post({"Sec-Fetch-Site": "same-origin"})
    assert not post({"Sec-Fetch-Site": "cross-site"})
    assert not post({"Sec-Fetch-Site": "same-site"})


def test_the_form_token_must_be_the_sessions_own() -> None:
    session = new_session("key")
    assert valid_form_token(session, session.csrf)
    assert not valid_form_token(session, None)
    assert not valid_form_token(session, "")
    assert not valid_form_token(session, new_session("key").csrf)
    assert not valid_form_token(Session("key", "ü", 0, "sid"), "u")


def test_each_session_draws_a_fresh_token_and_id_and_expires() -> None:
    first, second = new_session("k"), new_session("k")
    assert first.csrf != second.csrf and len(first.csrf) >= 32
    assert first.sid != second.sid and len(first.sid) >= 32
    # The form token is on every page; the id must not be learnt from one.
    assert first.sid != first.csrf
    assert first.expires_ms > 0
