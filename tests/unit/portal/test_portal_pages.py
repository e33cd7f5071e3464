"""Each portal page against a fake API: what it shows, which buttons a session's
capabilities give it, what it sends the API, and the headers around it."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

from tests.unit.portal.conftest import (
    APP_ID,
    EVENT_TYPES,
    Portal,
    delivery,
    endpoint,
    problem,
    session_with,
)
from webhook_service.delivery import ssrf
from webhook_service.portal.endpoint_form import BLOCKED_REASONS
from webhook_service.portal_access import Capability

BASE = f"/v1/applications/{APP_ID}"
VIEW_ONLY = frozenset({Capability.VIEW})


async def test_without_a_session_every_page_is_a_plain_401(make_portal: Any) -> None:
    portal: Portal = await make_portal(None)
    for url in ("/portal", "/portal/endpoints/ep_1", "/portal/deliveries/dlv_1", "/portal/verify"):
        status, html, headers = await portal.get(url)
        assert status == 401 and "has ended" in html, url
        assert "Acme" not in html and headers["Referrer-Policy"] == "no-referrer"
    status, _, _ = await portal.post("/portal/endpoints/ep_1/disable")
    assert status == 401
    assert portal.api.calls == []


async def test_the_endpoint_list_shows_health_and_calls_the_api_as_the_session(
    make_portal: Any,
) -> None:
    portal: Portal = await make_portal(session_with())
    status, html, _ = await portal.get("/portal")
    assert status == 200
    assert '<a href="/portal/endpoints/ep_1">ep_1</a>' in html
    assert '<span class="badge bad">failing</span>' in html  # its last failure is the latest
    assert 'href="/portal/endpoints/new"' in html
    assert 'href="/portal/deliveries?endpoint_id=ep_1"' in html
    assert "/dashboard/endpoints" not in html and "/dashboard/applications" not in html
    # Only the application's nested routes (and the catalog), with the session's credential.
    assert {p for _, p, _ in portal.api.calls} <= {
        BASE, BASE + "/endpoints", BASE + "/endpoints/ep_1/stats",
    }  # fmt: skip
    assert set(portal.api.keys) == {"Bearer whps_sealed"}


async def test_branding_and_framing_come_from_the_application(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with())
    _, html, headers = await portal.get("/portal")
    assert "<title>Endpoints · Acme &lt;Webhooks&gt;</title>" in html
    assert '<img class="logo" src="https://cdn.acme.example/logo.png" alt="">' in html
    style = ":root{--accent:#aa3366}"
    assert f"<style>{style}</style>" in html
    csp = dict(d.strip().split(" ", 1) for d in headers["Content-Security-Policy"].split(";"))
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert csp["style-src"] == f"'self' 'sha256-{digest}'"
    assert csp["img-src"] == "'self' https://cdn.acme.example"
    assert csp["frame-ancestors"] == "https://acme.example"
    assert csp["script-src"] == "'self'" and csp["default-src"] == "'none'"
    assert "X-Frame-Options" not in headers
    assert headers["Referrer-Policy"] == "no-referrer"


async def test_an_application_without_origins_or_branding_is_framed_nowhere(
    make_portal: Any,
) -> None:
    portal: Portal = await make_portal(session_with())
    plain: dict[str, Any] = {
        "id": APP_ID, "name": "Plain", "portal_origins": [], "portal_name": None,
        # Not https: never drawn, and no other origin in the policy (the API refuses one).
        "portal_logo_url": "http://cdn.acme.example/logo.png", "portal_accent": None,
    }  # fmt: skip
    portal.api.answers[("GET", BASE)] = (200, plain)
    _, html, headers = await portal.get("/portal")
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert "style-src 'self';" in headers["Content-Security-Policy"]
    assert "img-src 'self';" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    assert "<style>" not in html and "<img" not in html and "· Plain</title>" in html


def _forms(html: str) -> list[str]:
    return re.findall(r'<form method="post" action="([^"]+)"', html)


async def test_an_endpoint_page_offers_what_the_session_may_do(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with())
    status, html, _ = await portal.get("/portal/endpoints/ep_1")
    assert status == 200
    assert set(_forms(html)) == {
        "/portal/logout",
        *(f"/portal/endpoints/ep_1/{action}" for action in (
            "disable", "delete", "send-example", "secret", "rotate-secret", "recover")),
    }  # fmt: skip
    assert 'href="/portal/endpoints/ep_1/edit"' in html
    assert html.count('name="csrf" value="form-token"') == len(_forms(html))
    assert 'href="/portal/deliveries/dlv_1"' in html  # its recent messages
    assert html.count('<svg class="chart"') == 3


async def test_a_view_only_session_gets_no_form_but_sign_out(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with(VIEW_ONLY))
    for url in ("/portal", "/portal/endpoints/ep_1", "/portal/deliveries/dlv_1"):
        status, html, _ = await portal.get(url)
        assert status == 200 and _forms(html) == ["/portal/logout"], url
        assert "/edit" not in html and "endpoints/new" not in html


async def test_a_form_without_the_session_token_changes_nothing(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with())
    for token in (None, "another-token"):
        status, _, _ = await portal.post("/portal/endpoints/ep_1/disable", token=token)
        assert status == 403
    assert portal.api.posted("/endpoints/ep_1/disable") == []


async def test_the_api_403_for_a_missing_capability_is_the_page_403(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with(VIEW_ONLY))
    portal.api.answers[("POST", BASE + "/endpoints/ep_1/disable")] = problem(
        403, "missing-capability", "This portal session may not manage_endpoints."
    )
    status, html, _ = await portal.post("/portal/endpoints/ep_1/disable")
    assert status == 403 and "does not include this" in html
    assert portal.api.posted("/endpoints/ep_1/disable") == [None]


async def test_actions_call_the_api_and_come_back_with_a_notice(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with())
    api = portal.api
    api.answers[("POST", BASE + "/endpoints/ep_1/disable")] = (200, endpoint(disabled=True))
    api.answers[("DELETE", BASE + "/endpoints/ep_1")] = (204, None)
    api.answers[("POST", BASE + "/deliveries/dlv_1/retry")] = (202, delivery("pending"))
    api.answers[("POST", BASE + "/endpoints/ep_1/send-example")] = (
        202, {"event_id": "msg_2", "delivery_id": "dlv_2"},
    )  # fmt: skip
    api.answers[("POST", BASE + "/endpoints/ep_1/recover")] = (202, {"id": "job_1"})
    expected = {
        "/portal/endpoints/ep_1/disable": "/portal/endpoints/ep_1?done=disabled",
        "/portal/endpoints/ep_1/delete": "/portal?done=deleted",
        "/portal/deliveries/dlv_1/retry": "/portal/deliveries/dlv_1?done=retried",
        "/portal/endpoints/ep_1/recover": "/portal/jobs/job_1",
    }
    for action, location in expected.items():
        status, _, headers = await portal.post(action, {"window": "86400"})
        assert (status, headers["Location"]) == (303, location), action
    status, _, headers = await portal.post(
        "/portal/endpoints/ep_1/send-example", {"event_type": "invoice.paid"}
    )
    assert headers["Location"] == "/portal/deliveries/dlv_2?done=example"
    assert api.posted("/endpoints/ep_1/send-example") == [{"event_type": "invoice.paid"}]
    [recovery] = api.posted("/endpoints/ep_1/recover")
    assert recovery["until"] is None and recovery["since"].endswith("Z")


async def test_the_form_offers_the_catalog_with_each_type_explained(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with())
    status, html, _ = await portal.get("/portal/endpoints/new")
    assert status == 200
    assert '<input type="checkbox" name="event_types" value="invoice.paid">' in html
    assert "An invoice was paid in full." in html and "A user &lt;left&gt;." in html
    assert "&quot;amount&quot;: 4200" in html  # its example
    assert "&quot;type&quot;: &quot;integer&quot;" in html  # its schema
    assert '<span class="badge warn">deprecated</span>' in html
    assert _forms(html)[-1] == "/portal/endpoints"


async def test_adding_an_endpoint_sends_the_choices_and_shows_its_secret_once(
    make_portal: Any,
) -> None:
    portal: Portal = await make_portal(session_with())
    made = endpoint("ep_2", secret="whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0")
    portal.api.answers[("POST", BASE + "/endpoints")] = (201, made)
    fields = [("url", " https://hooks.acme.example/in "), ("event_types", "invoice.paid"),
              ("event_types", "user.deleted"), ("channels", "eu, , priority"),
              ("description", "Orders")]  # fmt: skip
    status, html, _ = await portal.post("/portal/endpoints", fields)
    assert status == 200 and "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0" in html
    assert portal.api.posted("/endpoints") == [
        {"url": "https://hooks.acme.example/in", "description": "Orders",
         "event_types": ["invoice.paid", "user.deleted"], "channels": ["eu", "priority"]},
    ]  # fmt: skip
    # None ticked, no channel: every type, every event.
    await portal.post("/portal/endpoints", [("url", "https://x.example/")])
    assert portal.api.posted("/endpoints")[-1]["event_types"] is None
    assert portal.api.posted("/endpoints")[-1]["channels"] is None


async def test_a_refused_url_is_explained_in_plain_words_with_the_input_kept(
    make_portal: Any,
) -> None:
    portal: Portal = await make_portal(session_with())
    portal.api.answers[("POST", BASE + "/endpoints")] = problem(
        422, "destination-blocked", "This URL cannot receive webhooks: 127.0.0.1 is loopback",
        [{"pointer": "/url", "detail": "blocked_address: 127.0.0.1 is a loopback address"}],
    )  # fmt: skip
    fields = [("url", "http://127.0.0.1:8080/hook"), ("event_types", "invoice.paid")]
    status, html, _ = await portal.post("/portal/endpoints", fields)
    assert status == 422
    assert "not on the public internet" in html and "localhost" in html
    assert 'value="http://127.0.0.1:8080/hook"' in html
    assert 'value="invoice.paid" checked' in html


async def test_editing_patches_and_clears_what_is_emptied(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with())
    portal.api.answers[("PATCH", BASE + "/endpoints/ep_1")] = (200, endpoint())
    status, html, _ = await portal.get("/portal/endpoints/ep_1/edit")
    assert 'value="https://hooks.acme.example/in"' in html
    assert 'value="invoice.paid" checked' in html
    status, _, headers = await portal.post(
        "/portal/endpoints/ep_1/edit", [("url", "https://hooks.acme.example/v2")]
    )
    assert (status, headers["Location"]) == (303, "/portal/endpoints/ep_1?done=saved")
    [patch] = [b for m, p, b in portal.api.calls if m == "PATCH"]
    assert patch == {"url": "https://hooks.acme.example/v2", "description": "",
                     "event_types": None, "channels": None}  # fmt: skip


async def test_a_delivery_page_shows_what_we_sent_and_follows_it_until_settled(
    make_portal: Any,
) -> None:
    portal: Portal = await make_portal(session_with())
    portal.api.answers[("GET", BASE + "/deliveries/dlv_1")] = (200, delivery("pending", 2, 1))
    status, html, _ = await portal.get("/portal/deliveries/dlv_1")
    assert status == 200
    assert 'data-follow="/portal/deliveries/dlv_1/attempts"' in html
    assert "&quot;amount&quot;: 4200" in html and "webhook-id" in html
    assert "Retry now" not in html  # pending: being sent anyway
    status, fragment, headers = await portal.get("/portal/deliveries/dlv_1/attempts")
    assert status == 200 and fragment.startswith('<section id="attempts"')
    assert "frame-ancestors https://acme.example" in headers["Content-Security-Policy"]
    portal.api.answers[("GET", BASE + "/deliveries/dlv_1")] = (200, delivery("failed", 2, 2))
    _, fragment, _ = await portal.get("/portal/deliveries/dlv_1/attempts")
    assert 'data-follow=""' in fragment and "answer" not in fragment.split("<h2>")[0]
    _, html, _ = await portal.get("/portal/deliveries/dlv_1")
    assert "/portal/deliveries/dlv_1/retry" in _forms(html)


async def test_the_catalog_and_verify_pages(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with(VIEW_ONLY))
    status, html, _ = await portal.get("/portal/event-types")
    assert status == 200
    for event_type in EVENT_TYPES:
        assert f"<code>{event_type['name']}</code>" in html
    status, html, _ = await portal.get("/portal/verify")
    assert status == 200
    for language in ("Python", "Node.js", "Go", "Ruby", "PHP", "curl + openssl"):
        assert f"<h2>{language}</h2>" in html or f"<h2>Shell: {language}</h2>" in html


async def test_static_files_and_redirects_get_the_strict_headers(make_portal: Any) -> None:
    portal: Portal = await make_portal(session_with())
    status, script, headers = await portal.get("/portal/static/portal.js")
    assert status == 200 and "data-follow" in script
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["Referrer-Policy"] == "no-referrer"


def test_every_reason_the_ssrf_guard_gives_has_plain_words() -> None:
    """The guard's reasons are the API's (errors[].detail before its colon); one added there
    without words here would fall back to the general explanation, so this says which."""
    source = Path(ssrf.__file__).read_text()
    reasons = set(re.findall(r'DestinationBlocked\(\s*"([a-z_]+)"', source))
    assert reasons and reasons <= set(BLOCKED_REASONS), reasons - set(BLOCKED_REASONS)
