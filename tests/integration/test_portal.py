"""The subscriber portal as its user meets it: Debian's Chromium, driven by Playwright,
follows a portal link into one application's portal on the real API with real workers,
adds an endpoint for a type picked from the catalog, has a private URL refused in plain
words, sends an example and sees its signed attempt arrive at a receiver that verifies it
(tests/support/receiver.py, with the standardwebhooks package), retries a failed delivery,
recovers a window, rotates the secret and signs out. A link without manage_endpoints gets no
form, and the API's 403 when it posts one anyway.

Screenshots of every page go to test-artifacts/portal/ (git-ignored); their paths are
printed."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
from playwright.async_api import Browser, Page, expect

from tests.integration.conftest import Api, wait_for
from tests.integration.test_applications import new_app
from tests.integration.test_dashboard import ARTIFACTS, accept, browser
from tests.integration.test_event_types import create, fresh
from tests.support.receiver import Receiver
from webhook_service import portal
from webhook_service.portal_access import Capability

__all__ = ["browser"]  # the fixture: Debian's Chromium

SHOTS = ARTIFACTS.parent / "portal"
EVERY = [str(c) for c in Capability]
SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "total": {"type": "integer"}},
    "required": ["order_id"],
}


async def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    target = SHOTS / f"{name}.png"
    await page.screenshot(path=str(target), full_page=True)
    print(f"screenshot: {target}")


async def portal_link(api: Api, app: str, **body: Any) -> str:
    status, made, _ = await api.call("POST", f"/v1/applications/{app}/portal-access", json=body)
    assert status == 201, made
    url: str = made["url"]
    return url


async def _tenant(api: Api) -> tuple[dict[str, Any], str]:
    """An application with its portal branding, and a catalog type of the test's own."""
    app = await new_app(
        api, fresh("Portal Co"), portal_name="Acme Webhooks", portal_accent="#8a2be2"
    )
    order = fresh("portal.order")
    await create(
        api, name=order, description="An order was placed.", schema=SCHEMA,
        examples=[{"order_id": "ord_42", "total": 1999}],
    )  # fmt: skip
    return app, order


async def test_a_subscriber_adds_an_endpoint_sends_an_example_retries_and_rotates(
    api: Api, receiver: Receiver, browser: Browser
) -> None:
    app, order = await _tenant(api)
    link = await portal_link(api, app["id"], capabilities=EVERY)
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.on("dialog", accept)
    visited: list[str] = []
    page.on("request", lambda request: visited.append(request.url))

    landed = await page.goto(link)
    await expect(page).to_have_url(re.compile(r"/portal$"))  # the token has left the URL
    # Its forms work under no-referrer, whose "Origin: null" the form check takes.
    assert landed is not None and landed.headers["referrer-policy"] == "no-referrer"
    await expect(page.get_by_role("heading", name="Endpoints", exact=True)).to_be_visible()
    await expect(page.get_by_role("link", name="Acme Webhooks")).to_be_visible()
    await shot(page, "01-no-endpoints")

    # A private address is refused, in words a newcomer reads, with what they typed kept.
    await page.get_by_role("link", name="Add an endpoint").click()
    await expect(page.get_by_text("An order was placed.")).to_be_visible()
    await page.get_by_label("Endpoint URL").fill("http://169.254.169.254/latest/meta-data")
    await page.get_by_role("checkbox", name=re.compile(re.escape(order))).check()
    await page.get_by_role("button", name="Add endpoint").click()
    await expect(page.get_by_text("not on the public internet")).to_be_visible()
    await expect(page.get_by_label("Endpoint URL")).to_have_value(
        "http://169.254.169.254/latest/meta-data"
    )
    await shot(page, "02-private-url-refused")

    # The receiver's address is an allowed network in the test stack.
    await page.get_by_label("Endpoint URL").fill(receiver.url("portal"))
    await page.get_by_label("Description").fill("Orders")
    await page.get_by_role("button", name="Add endpoint").click()
    await expect(page.get_by_role("heading", name="Endpoint added")).to_be_visible()
    secret = (await page.locator("pre.secret").inner_text()).strip()
    assert secret.startswith("whsec_")
    receiver.secrets["portal"] = [secret]
    await shot(page, "03-endpoint-added")

    await page.get_by_role("link", name="Go to the endpoint").click()
    await expect(page.get_by_role("heading", name="Orders")).to_be_visible()
    endpoint_url = page.url
    endpoint_id = endpoint_url.rsplit("/", 1)[-1]
    status, endpoint, _ = await api.call(
        "GET", f"/v1/applications/{app['id']}/endpoints/{endpoint_id}"
    )
    assert status == 200 and endpoint["event_types"] == [order], endpoint
    await shot(page, "04-endpoint")

    # An example from the catalog, followed live until its attempt is in.
    await page.get_by_label("Send an example").select_option(order)
    await page.get_by_role("button", name="Send example").click()
    await expect(page.get_by_role("heading", name="Message")).to_be_visible()
    attempts = page.locator("#attempts")
    await expect(attempts.locator("dd .badge").first).to_have_text("succeeded", timeout=30_000)
    await expect(attempts.locator("table tbody tr")).to_have_count(1)
    await expect(page.get_by_text("ord_42").first).to_be_visible()
    [arrived] = receiver.for_endpoint("portal")
    assert arrived.verified and arrived.status == 200
    assert b'"order_id":"ord_42"' in arrived.body and order.encode() in arrived.body
    await expect(attempts.get_by_text(arrived.webhook_id)).to_be_attached()
    await shot(page, "05-example-arrived")

    # A failing receiver: every attempt fails; once it heals, one retry delivers it.
    healed = False
    receiver.behaviours["portal"] = lambda _name, _n: 200 if healed else 500
    await page.goto(endpoint_url)
    await page.get_by_role("button", name="Send example").click()
    await expect(attempts.locator("dd .badge").first).to_have_text("failed", timeout=30_000)
    await expect(attempts.locator("table tbody tr")).to_have_count(4)  # the stack's budget
    await shot(page, "06-failed")
    healed = True
    await page.get_by_role("button", name="Retry now").click()
    await expect(page.get_by_text("Retry requested: its next attempt is due now.")).to_be_visible()
    await expect(attempts.locator("dd .badge").first).to_have_text("succeeded", timeout=30_000)
    await expect(attempts.locator("table tbody tr")).to_have_count(5)
    assert [r.status for r in receiver.for_endpoint("portal")][-1] == 200
    await shot(page, "07-retried")

    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Messages").click()
    await expect(page.locator("tbody tr")).to_have_count(2)
    await shot(page, "08-messages")
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Endpoints").click()
    row = page.get_by_role("row").filter(has_text=endpoint_id)
    await expect(row.get_by_text("degraded")).to_be_visible()  # 2 of its 6 attempts got a 2xx
    await shot(page, "08-endpoints")

    # Recover the last hour: the recovery's page follows it to its end.
    await page.goto(endpoint_url)
    await page.get_by_role("button", name="Recover").click()
    await expect(page.get_by_role("heading", name="Recovery")).to_be_visible()
    await expect(page.locator("dd .badge").nth(0)).to_have_text("done", timeout=30_000)
    await shot(page, "09-recovery")

    # Rotate: the new secret is shown once and is the one the API now signs with.
    await page.goto(endpoint_url)
    await page.get_by_label("old key signs for").select_option("3600")
    await page.get_by_role("button", name="Rotate secret").click()
    rotated = (await page.locator("pre.secret").inner_text()).strip()
    _, current, _ = await api.call(
        "GET", f"/v1/applications/{app['id']}/endpoints/{endpoint_id}/secret"
    )
    assert rotated == current["secret"] != secret
    await shot(page, "10-rotated")

    await page.get_by_role("link", name="Back to the endpoint").click()
    await page.get_by_role("button", name="Reveal secret").click()
    assert (await page.locator("pre.secret").inner_text()).strip() == rotated
    await shot(page, "10-revealed")
    await page.get_by_role("link", name="Back to the endpoint").click()
    await page.get_by_role("link", name="Edit").click()
    await expect(page.get_by_label("Endpoint URL")).to_have_value(receiver.url("portal"))
    await shot(page, "11-edit")
    for name, heading, file in (
        ("Event types", "Event types", "12-event-types"),
        ("Verify signatures", "Verify our signature", "13-verify"),
    ):
        await page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()
        await expect(page.get_by_role("heading", name=heading)).to_be_visible()
        await shot(page, file)

    token = link.split("token=", 1)[1]
    assert not [url for url in visited if token in url and "/portal/enter" not in url]
    await page.get_by_role("button", name="Sign out").click()
    await page.goto(endpoint_url)
    await expect(page.get_by_role("heading", name="Signed out")).to_be_visible()
    await shot(page, "14-signed-out")
    await context.close()


async def test_a_link_without_manage_endpoints_gets_no_form_and_a_403_if_it_posts(
    api: Api, receiver: Receiver, browser: Browser
) -> None:
    app, order = await _tenant(api)
    status, made, _ = await api.call(
        "POST", f"/v1/applications/{app['id']}/endpoints",
        json={"url": receiver.url("viewer"), "event_types": [order]},
    )  # fmt: skip
    assert status == 201, made
    link = await portal_link(api, app["id"], capabilities=["view", "retry"])
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    await page.goto(link)
    await expect(page.get_by_role("link", name="Add an endpoint")).to_have_count(0)
    await page.get_by_role("link", name=made["id"]).click()
    await expect(page.get_by_role("heading", name=made["id"])).to_be_visible()
    for name in ("Edit", "Disable", "Delete", "Send example", "Rotate secret", "Reveal secret"):
        await expect(page.get_by_role("button", name=name)).to_have_count(0)
    await expect(page.get_by_role("link", name="Edit")).to_have_count(0)
    await expect(page.get_by_role("button", name="Recover")).to_be_visible()  # it may retry
    await shot(page, "15-view-and-retry-only")
    await page.close()

    # Posting the forms it was not given anyway, with its own session and form token.
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as client:
        csrf = await _form_token(client, link)
        base = api.base + "/portal/endpoints"
        for action, fields in (
            (f"/{made['id']}/disable", {}),
            (f"/{made['id']}/delete", {}),
            ("", {"url": receiver.url("other")}),
        ):
            async with client.post(base + action, data={"csrf": csrf, **fields}) as refused:
                assert refused.status == 403, action
                assert "does not include this" in await refused.text()
    _, still, _ = await api.call("GET", f"/v1/applications/{app['id']}/endpoints/{made['id']}")
    assert still["disabled"] is False
    _, listed, _ = await api.call("GET", f"/v1/applications/{app['id']}/endpoints")
    assert [e["id"] for e in listed["data"]] == [made["id"]]
    await api.call("DELETE", f"/v1/applications/{app['id']}/endpoints/{made['id']}")


async def _form_token(client: aiohttp.ClientSession, link: str) -> str:
    """Follow a portal link with ``client`` and read the form token its first page shows."""
    async with client.get(link) as entered:
        assert entered.status == 200
        found = re.search(r'name="csrf" value="([^"]+)"', await entered.text())
    assert found is not None
    return found[1]


async def test_a_session_finds_nothing_of_another_application_on_any_page(
    api: Api, receiver: Receiver
) -> None:
    """Every portal page that names a record, given the other application's ids: 404, and
    nothing of it changed."""
    mine, _ = await _tenant(api)
    theirs, order = await _tenant(api)
    there = f"/v1/applications/{theirs['id']}"
    status, endpoint, _ = await api.call(
        "POST", there + "/endpoints", json={"url": receiver.url("theirs"), "event_types": [order]}
    )
    assert status == 201, endpoint
    receiver.secrets["theirs"] = [endpoint["secret"]]
    status, event, _ = await api.call(
        "POST", there + "/events", json={"type": order, "data": {"order_id": "ord_1"}}
    )
    assert status == 202, event

    async def delivered() -> bool:
        _, found, _ = await api.call("GET", there + f"/deliveries?endpoint_id={endpoint['id']}")
        return bool(found["data"]) and found["data"][0]["status"] == "succeeded"

    await wait_for(delivered)
    _, found, _ = await api.call("GET", there + f"/deliveries?endpoint_id={endpoint['id']}")
    since = {"since": "2026-01-01T00:00:00Z"}
    _, job, _ = await api.call("POST", there + f"/endpoints/{endpoint['id']}/recover", json=since)
    ids = {
        "endpoint_id": endpoint["id"],
        "delivery_id": found["data"][0]["id"],
        "job_id": job["id"],
    }
    fields = {"url": receiver.url("stolen"), "event_type": order, "window": "3600",
              "grace_period_seconds": "0"}  # fmt: skip
    link = await portal_link(api, mine["id"], capabilities=EVERY)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        csrf = await _form_token(client, link)
        tried = 0
        for method, route, _ in portal.ROUTES:
            if "{" not in route:
                continue
            url = api.base + route.format(**ids)
            data = {"csrf": csrf, **fields} if method == "POST" else None
            async with client.request(method, url, data=data, allow_redirects=False) as answer:
                assert answer.status == 404, (method, route, answer.status)
                assert receiver.url("theirs") not in await answer.text()
            tried += 1
        assert tried == len([r for _, r, _ in portal.ROUTES if "{" in r])
        async with client.get(
            api.base + "/portal/deliveries", params={"endpoint_id": endpoint["id"]}
        ) as listing:
            assert listing.status == 200 and "No message matches." in await listing.text()
    _, still, _ = await api.call("GET", there + f"/endpoints/{endpoint['id']}")
    assert still["disabled"] is False and still["url"] == receiver.url("theirs")
    _, secret, _ = await api.call("GET", there + f"/endpoints/{endpoint['id']}/secret")
    assert secret["secret"] == endpoint["secret"]
    _, after, _ = await api.call("GET", there + f"/deliveries?endpoint_id={endpoint['id']}")
    assert [d["id"] for d in after["data"]] == [d["id"] for d in found["data"]]
    assert not receiver.for_endpoint("stolen")
    await api.call("DELETE", there + f"/endpoints/{endpoint['id']}")
