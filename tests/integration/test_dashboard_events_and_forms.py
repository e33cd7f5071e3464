"""The dashboard's events page, its endpoint form and "Send example" (issue 19 item 6), in
Debian's Chromium as test_dashboard.py, against the API on a real socket with real workers
and a receiver that verifies every request with the endpoint's secret.

An event found by id and by type, its payload shown escaped; an endpoint created through
the form and seen in the API (its secret shown once), its retry schedule edited, an invalid
filter answered with the API's own problem beside the field; an example sent from the
endpoint's page and followed to its delivery. Screenshots 50-56 in test-artifacts/dashboard/.
"""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
from playwright.async_api import Browser, Dialog, Page, ViewportSize, expect

from tests.integration.conftest import Api, create_endpoint, send_event, wait_for
from tests.integration.test_applications import new_app
from tests.integration.test_dashboard import browser, screenshot, sign_in
from tests.integration.test_event_types import create, fresh
from tests.support.apikeys import make_key
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY

# On SQLite alone, as test_dashboard.py: the lists' answers on each backend are the history
# tests' (tests/integration/history/).

__all__ = ["browser"]  # the fixture, shared with test_dashboard.py

VIEWPORT: ViewportSize = {"width": 1280, "height": 900}
HOSTILE = "<script>alert('xss')</script><img src=x onerror=alert(1)>"


def _nav(page: Page, name: str) -> Any:
    return page.get_by_role("navigation", name="Main").get_by_role("link", name=name)


async def _listed(api: Api, query: str, event_id: str) -> bool:
    """The event is in GET /v1/events with ``query``: the log has it (it follows the store
    by the ship interval)."""
    _, page, _ = await api.call("GET", f"/v1/events?{query}")
    return any(e["id"] == event_id for e in page["data"])


async def test_events_are_found_by_id_and_type_and_their_payload_stays_text(
    api: Api, receiver: Receiver, browser: Browser
) -> None:
    kind = fresh("dash.events")
    endpoint = await create_endpoint(api, receiver, "dash-events", [kind])
    hostile = await send_event(api, kind, {"note": HOSTILE, "amount": 12})
    other = await send_event(api, kind, {"note": "plain", "amount": 3})
    page = await browser.new_page(viewport=VIEWPORT)
    dialogs: list[str] = []

    async def refuse(dialog: Dialog) -> None:
        # A script from the payload would open one: none may.
        dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", refuse)
    await sign_in(page, api)

    # By id: found at once (the store first), straight to its page.
    await _nav(page, "Events").click()
    await expect(page.get_by_role("heading", name="Events", exact=True)).to_be_visible()
    await page.get_by_label("Event id").fill(hostile)
    await page.get_by_role("button", name="Search").click()
    await expect(page).to_have_url(re.compile(rf"/dashboard/events/{hostile}$"))
    await expect(page.get_by_role("heading", name="Event", exact=True)).to_be_visible()
    shown = page.locator("pre.payload")
    assert json.loads(await shown.inner_text()) == {"note": HOSTILE, "amount": 12}
    # Escaped: text in the page, no element of its own.
    await expect(page.locator("main script, main img")).to_have_count(0)
    assert "&lt;script&gt;alert('xss')&lt;/script&gt;" in await shown.inner_html()
    facts = page.locator("dl.facts")
    await expect(facts).to_contain_text(kind)
    deliveries = page.locator("tbody tr")
    await expect(deliveries).to_have_count(1)
    await expect(deliveries.first.get_by_role("link", name=endpoint["id"])).to_be_visible()

    async def delivered() -> bool:
        await page.reload()
        return await deliveries.first.get_by_text("succeeded", exact=True).count() == 1

    await wait_for(delivered, timeout=30)
    await screenshot(page, "50-event-payload-escaped")
    # Its delivery's own page, from the row.
    await deliveries.first.get_by_role("link").first.click()
    await expect(page.get_by_role("heading", name="Delivery")).to_be_visible()

    # An id nobody has: said so, on the list.
    await _nav(page, "Events").click()
    await page.get_by_label("Event id").fill("msg_nothing_like_it")
    await page.get_by_role("button", name="Search").click()
    await expect(page.locator("p.notice.error")).to_contain_text("No event has this id")

    # By type: both of its events, once the log lists them, and nothing else.
    await wait_for(lambda: _listed(api, f"type={kind}", other))
    await wait_for(lambda: _listed(api, f"type={kind}", hostile))
    await page.get_by_label("Event id").fill("")
    await page.get_by_label("Type").fill(kind)
    await page.get_by_role("button", name="Search").click()
    await expect(page).to_have_url(re.compile(rf"type={re.escape(kind)}"))
    rows = page.locator("tbody tr")
    await expect(rows).to_have_count(2)
    for event_id in (hostile, other):
        await expect(page.locator(f'a[title="{event_id}"]')).to_be_visible()
    await screenshot(page, "51-events-by-type")

    # A time range that ends before it starts: the API's 422, said on the page.
    await page.get_by_label("Since (UTC)").fill("2026-01-31T13:00:00Z")
    await page.get_by_label("Until (UTC)").fill("2026-01-31T12:00:00Z")
    await page.get_by_role("button", name="Search").click()
    await expect(page.locator("p.notice.error")).to_contain_text("until")
    # One page at a time, with the API's cursor: one event, then the other on the next.
    await page.goto(api.base + f"/dashboard/events?type={kind}&limit=1")
    await expect(rows).to_have_count(1)
    first = await rows.first.get_by_role("link").get_attribute("title")
    await page.get_by_role("link", name="Next page").click()
    await expect(page).to_have_url(re.compile(r"cursor="))
    await expect(rows).to_have_count(1)
    second = await rows.first.get_by_role("link").get_attribute("title")
    assert {first, second} == {hostile, other}
    assert dialogs == []
    await page.close()


async def _endpoint_of_form(page: Page) -> str:
    link = page.get_by_role("link", name="Go to the endpoint")
    href = await link.get_attribute("href")
    assert href is not None
    return href.rsplit("/", 1)[-1]


async def test_an_endpoint_is_created_edited_and_sent_an_example_from_the_dashboard(
    api: Api, receiver: Receiver, browser: Browser
) -> None:
    kind = fresh("dash.form")
    example = {"order_id": "ord_7", "total": 4200}
    await create(api, name=kind, description="An order was placed.", examples=[example])
    page = await browser.new_page(viewport=VIEWPORT)
    await sign_in(page, api)

    await page.get_by_role("link", name="New endpoint").click()
    await expect(page.get_by_role("heading", name="New endpoint")).to_be_visible()
    await page.get_by_label("Endpoint URL").fill(receiver.url("dash-form"))
    await page.get_by_label("Description").fill("Orders <from> the dashboard")
    await page.locator(f'input[name="event_types"][value="{kind}"]').check()
    await page.get_by_label("Retry schedule").fill("0, 1")
    await page.get_by_label("Request timeout").fill("5")
    await page.get_by_label("Ordering").select_option("fifo")
    await page.get_by_label("Headers").fill("X-Tenant: acme")
    await screenshot(page, "52-endpoint-form")
    await page.get_by_role("button", name="Create endpoint").click()
    await expect(page.get_by_role("heading", name="Endpoint created")).to_be_visible()
    endpoint_id = await _endpoint_of_form(page)
    api.created_endpoints.append(endpoint_id)
    secret = (await page.locator("pre.secret").inner_text()).strip()
    receiver.secrets["dash-form"] = [secret]
    await screenshot(page, "53-endpoint-created-secret")

    # In the API as typed: through the same route the command line uses.
    _, made, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}")
    assert made["url"] == receiver.url("dash-form")
    assert made["description"] == "Orders <from> the dashboard"
    assert made["event_types"] == [kind] and made["channels"] is None
    assert made["retry_schedule"] == [0, 1] and made["timeout_seconds"] == 5
    assert made["headers"] == {"X-Tenant": "acme"} and made["filter"] is None
    assert made["disabled"] is False and made["signature"] == "hmac"
    assert made["ordering"] == "fifo"
    _, current, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}/secret")
    assert secret == current["secret"]

    # Edit its retry schedule: saved, shown, and nothing else changed.
    await page.get_by_role("link", name="Go to the endpoint").click()
    await page.get_by_role("link", name="Edit", exact=True).click()
    await expect(page.get_by_role("heading", name="Edit endpoint")).to_be_visible()
    await expect(page.get_by_label("Retry schedule")).to_have_value("0, 1")
    await page.get_by_label("Retry schedule").fill("0, 2, 30")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_text("Endpoint saved")).to_be_visible()
    await expect(page.locator("dl.facts").first).to_contain_text("0, 2, 30 s (3 attempts)")
    _, edited, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}")
    assert edited["retry_schedule"] == [0, 2, 30]
    unchanged = (
        "url", "description", "event_types", "headers", "timeout_seconds", "ordering", "disabled",
    )  # fmt: skip
    assert {k: edited[k] for k in unchanged} == {k: made[k] for k in unchanged}
    await screenshot(page, "54-endpoint-edited")

    # An invalid filter: the API's problem on the form, as typed, and nothing saved.
    bad = {"data.total": {"$bogus": 1}}
    here = f"/v1/endpoints/{endpoint_id}"
    status, problem, _ = await api.call("PATCH", here, json={"filter": bad})
    assert status == 422, problem
    await page.get_by_role("link", name="Edit", exact=True).click()
    await page.get_by_label("Filter").fill(json.dumps(bad))
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("p.notice.error")).to_have_text(problem["detail"])
    beside = page.locator("label:has(textarea[name=filter]) ~ p.field-error").first
    await expect(beside).to_contain_text(problem["errors"][0]["detail"])
    await expect(page.get_by_label("Filter")).to_have_value(json.dumps(bad))
    await expect(page.get_by_label("Retry schedule")).to_have_value("0, 2, 30")
    await screenshot(page, "55-invalid-filter")
    # Not JSON at all: refused beside the field before anything is sent.
    await page.get_by_label("Filter").fill("{not json")
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator("p.field-error")).to_contain_text("not JSON")
    _, kept, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}")
    assert kept["filter"] is None and kept["updated_at"] == edited["updated_at"]

    # Send an example of one of its types: to its delivery's page, followed until it lands.
    await page.goto(api.base + f"/dashboard/endpoints/{endpoint_id}")
    await page.get_by_label("Send an example").select_option(kind)
    await page.get_by_role("button", name="Send example").click()
    await expect(page.get_by_role("heading", name="Delivery")).to_be_visible()
    await expect(page.get_by_text("Example sent")).to_be_visible()
    await expect(page.locator("dd .badge").first).to_have_text("succeeded", timeout=30_000)
    await screenshot(page, "56-example-delivered")
    (got,) = receiver.for_endpoint("dash-form")
    assert got.verified and json.loads(got.body)["data"] == example
    assert json.loads(got.body)["type"] == kind
    await page.close()


async def test_the_endpoint_form_guards_its_posts_and_acts_within_an_application(
    api: Api,
) -> None:
    base = api.base + "/dashboard"
    fields = {"url": "http://127.0.0.1:9/never", "retry_schedule": "0"}
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        async with client.post(base + "/login", data={"key": ADMIN_KEY}) as signed_in:
            assert signed_in.status == 200
        _, before, _ = await api.call("GET", "/v1/endpoints?limit=250")
        async with client.post(base + "/endpoints", data=fields) as no_token:
            assert no_token.status == 403
        async with client.get(base + "/endpoints/new") as form:
            assert form.status == 200
            token = re.search(r'name="csrf" value="([^"]+)"', await form.text())
        assert token is not None
        foreign = {"Origin": "https://evil.example"}
        async with client.post(
            base + "/endpoints", data={**fields, "csrf": token[1]}, headers=foreign
        ) as cross:
            assert cross.status == 403
        # A refusal of the API's own (a rate limit of 0) is the form again, never a 500.
        async with client.post(
            base + "/endpoints", data={**fields, "csrf": token[1], "rate_limit": "0"}
        ) as refused:
            assert refused.status == 422
            assert "field-error" in await refused.text()
        _, after, _ = await api.call("GET", "/v1/endpoints?limit=250")
        assert [e["id"] for e in after["data"]] == [e["id"] for e in before["data"]]

        # Within an application: its form posts to its own routes, and its secret is shown.
        tenant = await new_app(api, "Dashboard form tenant")
        nested = f"{base}/applications/{tenant['id']}/endpoints"
        async with client.post(nested, data={**fields, "csrf": token[1]}) as made:
            assert made.status == 200
            page = await made.text()
        _, listed, _ = await api.call("GET", f"/v1/applications/{tenant['id']}/endpoints")
        (endpoint,) = listed["data"]
        assert endpoint["url"] == fields["url"] and endpoint["retry_schedule"] == [0]
        _, secret, _ = await api.call(
            "GET", f"/v1/applications/{tenant['id']}/endpoints/{endpoint['id']}/secret"
        )
        assert secret["secret"] in page
        assert f"/dashboard/applications/{tenant['id']}/endpoints/{endpoint['id']}" in page
        # Its events page lists its own alone (none yet), within it.
        async with client.get(f"{base}/applications/{tenant['id']}/events") as its_events:
            listing = await its_events.text()
            assert its_events.status == 200 and "No event matches" in listing
            assert f'action="/dashboard/applications/{tenant["id"]}/events"' in listing
        status, _, _ = await api.call(
            "DELETE", f"/v1/applications/{tenant['id']}/endpoints/{endpoint['id']}"
        )
        assert status == 204

    # A key that may manage endpoints but not read the catalog (events:read) still gets the
    # form and the endpoint's page, without the catalog's choices and Send example.
    manager = await make_key(api, ["endpoints:read", "endpoints:write", "deliveries:read"])
    status, mine, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": fields["url"], "event_types": ["dash.nothing"]}
    )
    assert status == 201, mine
    api.created_endpoints.append(mine["id"])
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        async with client.post(base + "/login", data={"key": manager["key"]}) as signed_in:
            assert signed_in.status == 200
        async with client.get(base + "/endpoints/new") as form:
            assert form.status == 200 and "Create endpoint" in await form.text()
        async with client.get(f"{base}/endpoints/{mine['id']}") as shown:
            text = await shown.text()
            assert shown.status == 200 and "Send example" not in text and "Edit" in text
