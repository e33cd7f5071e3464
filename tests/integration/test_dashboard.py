"""The dashboard as a person uses it: Debian's Chromium, driven by Playwright, against the
API on a real socket with real workers; plus its defences, checked over plain HTTP.

Screenshots go to test-artifacts/dashboard/ (git-ignored); their paths are printed."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from playwright.async_api import Browser, Dialog, Page, async_playwright, expect
from yarl import URL

from tests.integration.conftest import (
    Api,
    create_endpoint,
    send_event,
    serve_api,
    settings_for,
    wait_for,
)
from tests.support.apikeys import make_key
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack

# The dashboard reads the log only through the API, whose answers on each backend the
# history tests check (tests/integration/history/, on both): SQLite alone here.

CHROMIUM = Path("/usr/bin/chromium")
# Debian's browser, never one Playwright downloads; nothing reaches out but to our server.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
COOKIE = "whs_dashboard"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM.exists():
        message = "Debian's chromium is not installed: run `make chromium`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        await launched.close()


async def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(target), full_page=True)
    print(f"screenshot: {target}")


async def sign_in(page: Page, api: Api, key: str = ADMIN_KEY) -> None:
    await page.goto(api.base + "/dashboard")
    await expect(page).to_have_url(re.compile(r"/dashboard/login$"))
    await page.get_by_label("API key").fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Endpoints", exact=True)).to_be_visible()


async def accept(dialog: Dialog) -> None:
    await dialog.accept()


async def test_sign_in_find_a_failed_delivery_and_retry_it(
    api: Api, receiver: Receiver, browser: Browser
) -> None:
    healed = False
    receiver.behaviours["dash"] = lambda _name, _n: 200 if healed else 500
    endpoint = await create_endpoint(api, receiver, "dash", ["dash.order"])
    await send_event(api, "dash.order", {"order": 7})

    async def failed() -> bool:
        # As the deliveries page lists it: the log has its last state.
        query = f"/v1/deliveries?endpoint_id={endpoint['id']}&status=failed"
        _, page, _ = await api.call("GET", query)
        return bool(page["data"])

    await wait_for(failed)
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    visited: list[str] = []
    page.on("request", lambda request: visited.append(request.url))
    page.on("dialog", accept)

    await sign_in(page, api)
    row = page.get_by_role("row").filter(has_text=endpoint["id"])
    await expect(row.get_by_text("failing")).to_be_visible()
    await screenshot(page, "01-endpoints")

    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Deliveries").click()
    await page.get_by_label("Status").select_option("failed")
    await page.get_by_label("Endpoint").fill(endpoint["id"])
    await page.get_by_role("button", name="Filter").click()
    await expect(page).to_have_url(re.compile(r"status=failed"))
    rows = page.locator("tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first.get_by_text("failed", exact=True)).to_be_visible()
    await screenshot(page, "02-failed-deliveries")

    await rows.first.get_by_role("link").first.click()
    await expect(page.get_by_role("heading", name="Delivery")).to_be_visible()
    attempts = page.locator("table tbody tr")
    await expect(attempts).to_have_count(4)  # the test stack's budget: 4 attempts
    await expect(attempts.first.get_by_text("answer 500")).to_be_visible()
    await screenshot(page, "03-delivery-attempts")

    healed = True
    await page.get_by_role("button", name="Retry now").click()
    # The page follows the pending delivery, reloading itself until it settles.
    await expect(page.locator("dd .badge").first).to_have_text("succeeded", timeout=30_000)
    await expect(attempts).to_have_count(5)
    await screenshot(page, "04-retried-and-succeeded")

    assert [r.status for r in receiver.for_endpoint("dash")][-1] == 200
    assert all(r.verified for r in receiver.for_endpoint("dash"))
    assert not [url for url in visited if ADMIN_KEY in url]
    (cookie,) = [c for c in await context.cookies() if c["name"] == COOKIE]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/dashboard" and ADMIN_KEY not in cookie["value"]
    await context.close()


async def test_an_endpoint_page_charts_it_and_its_buttons_work(
    api: Api, receiver: Receiver, browser: Browser
) -> None:
    receiver.behaviours["charted"] = lambda _name, n: 503 if n % 3 == 0 else 200
    endpoint = await create_endpoint(api, receiver, "charted", ["dash.chart"])
    for n in range(6):
        await send_event(api, "dash.chart", {"n": n})
    await wait_for(lambda: _arrived(receiver, "charted", 8))
    # The workers add their attempt counts a second later (WEBHOOK_COUNTS_INTERVAL): the
    # charts draw from those counts, not from the receiver.
    await wait_for(lambda: _counted(api, endpoint["id"], 8))
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("dialog", accept)
    await sign_in(page, api)
    await page.get_by_role("link", name=endpoint["id"]).click()
    await expect(page.get_by_role("heading", name=endpoint["id"])).to_be_visible()
    charts = page.locator("svg.chart")
    await expect(charts).to_have_count(3)
    # Bars for deliveries and attempts; points for latency.
    await expect(charts.nth(1).locator("rect.warn").first).to_be_attached()
    await expect(charts.nth(2).locator("circle").first).to_be_attached()
    await screenshot(page, "05-endpoint")

    await page.get_by_role("button", name="Disable").click()
    await expect(page.get_by_text("disabled (manual)")).to_be_visible()
    assert (await api.call("GET", f"/v1/endpoints/{endpoint['id']}"))[1]["disabled"] is True
    await page.get_by_role("button", name="Enable").click()
    await expect(page.get_by_text("Endpoint enabled")).to_be_visible()
    assert (await api.call("GET", f"/v1/endpoints/{endpoint['id']}"))[1]["disabled"] is False

    await page.get_by_label("old key signs for").select_option("3600")
    await page.get_by_role("button", name="Rotate secret").click()
    shown = (await page.locator("pre.secret").inner_text()).strip()
    _, current, _ = await api.call("GET", f"/v1/endpoints/{endpoint['id']}/secret")
    assert shown == current["secret"] != endpoint["secret"]
    await screenshot(page, "06-rotated")
    await page.close()


async def _arrived(receiver: Receiver, name: str, count: int) -> bool:
    return len([r for r in receiver.for_endpoint(name) if r.status is not None]) >= count


async def _counted(api: Api, endpoint_id: str, attempts: int) -> bool:
    _, stats, _ = await api.call("GET", f"/v1/endpoints/{endpoint_id}/stats")
    return bool(stats["last_hour"]["attempts"] >= attempts)


def _cookie(response: aiohttp.ClientResponse) -> str:
    morsel = response.cookies.get(COOKIE)
    assert morsel is not None, "no session cookie was set"
    return morsel.value


async def test_the_dashboard_guards_its_session_and_its_forms(api: Api) -> None:
    jar = aiohttp.CookieJar(unsafe=True)  # cookies for 127.0.0.1, as a browser keeps them
    base = api.base + "/dashboard"
    async with aiohttp.ClientSession(cookie_jar=jar) as client:
        async with client.get(base, allow_redirects=False) as signed_out:
            assert (signed_out.status, signed_out.headers["Location"]) == (303, "/dashboard/login")
            assert "default-src 'none'" in signed_out.headers["Content-Security-Policy"]
        async with client.post(base + "/login", data={"key": "not-a-key"}) as wrong:
            assert wrong.status == 422 and "not valid" in await wrong.text()
            assert COOKIE not in wrong.cookies
        foreign = {"Origin": "https://evil.example"}
        async with client.post(base + "/login", data={"key": ADMIN_KEY}, headers=foreign) as cross:
            assert cross.status == 403 and COOKIE not in cross.cookies
        async with client.post(
            base + "/login", data={"key": ADMIN_KEY}, allow_redirects=False
        ) as good:
            assert (good.status, good.headers["Location"]) == (303, "/dashboard")
            sealed = _cookie(good)
            assert "HttpOnly" in good.headers["Set-Cookie"]
            assert "SameSite=Strict" in good.headers["Set-Cookie"]
        async with client.get(base) as home:
            assert home.status == 200 and "Endpoints" in await home.text()

        # A form without the session's token, or from another origin, changes nothing.
        target = base + "/deliveries/dlv_x/retry"
        async with client.post(target, data={}) as no_token:
            assert no_token.status == 403
        async with client.get(base + "/deliveries") as listing:
            token = re.search(r'name="csrf" value="([^"]+)"', await listing.text())
        assert token is not None
        async with client.post(target, data={"csrf": token[1]}, headers=foreign) as cross:
            assert cross.status == 403
        async with client.post(target, data={"csrf": token[1]}) as same:
            assert same.status == 404  # through to the API, which has no such delivery

    # Behind a TLS-terminating proxy the cookie is Secure.
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        proxied = {"X-Forwarded-Proto": "https"}
        async with client.post(
            base + "/login", data={"key": ADMIN_KEY}, headers=proxied, allow_redirects=False
        ) as behind_tls:
            assert "Secure" in behind_tls.headers["Set-Cookie"]
    assert "Secure" not in good.headers["Set-Cookie"]

    # The cookie is sealed: altered, it is no session at all.
    tampered = sealed[:-8] + ("A" * 8 if not sealed.endswith("A" * 8) else "B" * 8)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        client.cookie_jar.update_cookies({COOKIE: tampered}, response_url=URL(base))
        async with client.get(base, allow_redirects=False) as forged:
            assert forged.status == 303


async def test_the_signed_in_key_bounds_what_the_dashboard_shows(api: Api) -> None:
    """It acts with the person's key: no scope, no page; revoked, signed out."""
    producer = await make_key(api, ["events:write"])
    base = api.base + "/dashboard"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        async with client.post(base + "/login", data={"key": producer["key"]}) as signed_in:
            assert signed_in.status == 403  # landed on the overview, which needs endpoints:read
            assert "endpoints:read" in await signed_in.text()
        status, _, _ = await api.call("DELETE", f"/v1/api-keys/{producer['id']}")
        assert status == 204
        async with client.get(base + "/deliveries", allow_redirects=False) as revoked:
            assert (revoked.status, revoked.headers["Location"]) == (303, "/dashboard/login")


async def _with_cookie(base: str, cookie: str, method: str = "GET", path: str = "") -> str:
    """What a client holding only a copy of the cookie gets: the page's status, or where
    it is sent instead."""
    url = base + "/dashboard" + path
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        client.cookie_jar.update_cookies({COOKIE: cookie}, response_url=URL(url))
        async with client.request(method, url, allow_redirects=False) as response:
            return response.headers.get("Location", str(response.status))


async def test_signing_out_ends_every_copy_of_the_session(api: Api, stack: Stack) -> None:
    """Sign-out ends the session in the store, not only in the browser that signed out: a
    copy of its cookie is refused afterwards, by this API process and by any other."""
    base = api.base + "/dashboard"
    async with serve_api(settings_for(stack)) as (_, other):
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
            async with client.post(
                base + "/login", data={"key": ADMIN_KEY}, allow_redirects=False
            ) as signed_in:
                copied = _cookie(signed_in)
            for where in (api, other):  # the copy is a session until then, on either process
                assert await _with_cookie(where.base, copied) == "200"
            async with client.get(base) as home:
                token = re.search(r'name="csrf" value="([^"]+)"', await home.text())
            assert token is not None
            async with client.post(
                base + "/logout", data={"csrf": token[1]}, allow_redirects=False
            ) as signed_out:
                assert signed_out.headers["Location"] == "/dashboard/login?done=signed-out"
        for where in (api, other):
            assert await _with_cookie(where.base, copied) == "/dashboard/login"
            assert await _with_cookie(where.base, copied, path="/deliveries") == "/dashboard/login"
            # A form post with the copy is turned away before its token is even looked at.
            refused = await _with_cookie(where.base, copied, "POST", "/deliveries/dlv_x/retry")
            assert refused == "/dashboard/login"
            # The sign-in page offers itself again rather than taking the copy as signed in.
            assert await _with_cookie(where.base, copied, path="/login") == "200"
