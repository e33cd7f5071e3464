"""What the dashboard and the portal say of a delivery that is not final, in Debian's
Chromium against the real stack: one that failed once and waits an hour for its retry says
when its next attempt is ("next attempt at …", as the pages show times), not that a worker
is on it; a scheduled one says when it is scheduled for.

Screenshots go to test-artifacts/dashboard/ and test-artifacts/portal/ (git-ignored)."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Browser, Page, expect

from tests.integration.conftest import Api, wait_for
from tests.integration.test_applications import app_endpoint, app_event, new_app
from tests.integration.test_dashboard import browser, screenshot, sign_in
from tests.integration.test_event_types import fresh
from tests.integration.test_portal import EVERY, portal_link, shot
from tests.support.receiver import Receiver
from webhook_service.admin.describe import moment
from webhook_service.timeutil import now_ms, parse_iso

__all__ = ["browser"]  # the fixture: Debian's Chromium

# The endpoint's own schedule: a first attempt, then a retry an hour later.
RETRY_AFTER = 3600


async def _only_delivery(api: Api, app: str, event_id: str) -> dict[str, Any]:
    status, event, _ = await api.call("GET", f"/v1/applications/{app}/events/{event_id}")
    assert status == 200, event
    [summary] = event["deliveries"]
    status, delivery, _ = await api.call("GET", f"/v1/deliveries/{summary['id']}")
    assert status == 200, delivery
    found: dict[str, Any] = delivery
    return found


async def _waiting_delivery(api: Api, receiver: Receiver) -> tuple[str, dict[str, Any], str]:
    """An application whose endpoint failed a delivery once; the delivery waits for its
    retry. Also a scheduled delivery's id. Returns (application id, waiting, scheduled id)."""
    app = (await new_app(api, fresh("Waiting Co")))["id"]
    kind = fresh("wait.order")
    receiver.behaviours["waits"] = lambda _name, _n: 500
    endpoint = await app_endpoint(api, receiver, app, "waits", [kind])
    status, changed, _ = await api.call(
        "PATCH",
        f"/v1/applications/{app}/endpoints/{endpoint['id']}",
        json={"retry_schedule": [0, RETRY_AFTER]},
    )
    assert status == 200, changed
    failed_once = (await app_event(api, app, kind, {"n": 1}))["id"]

    async def tried_once() -> bool:
        delivery = await _only_delivery(api, app, failed_once)
        return bool(delivery["attempts"] == 1 and delivery["attempt_log"])

    await wait_for(tried_once)
    waiting = await _only_delivery(api, app, failed_once)
    assert (waiting["status"], waiting["last_status_code"]) == ("pending", 500)
    # An hour on, give or take the jitter (WEBHOOK_RETRY_JITTER, 0.2).
    assert parse_iso(waiting["next_attempt_at"]) > now_ms() + RETRY_AFTER * 1000 // 2
    later = (await app_event(api, app, kind, {"n": 2}, delay_seconds=RETRY_AFTER))["id"]
    scheduled = await _only_delivery(api, app, later)
    assert scheduled["status"] == "scheduled"
    return app, waiting, scheduled["id"]


async def _says(page: Page, where: str, words: str) -> None:
    await expect(page.locator(where).get_by_text(words)).to_be_visible()
    assert "worker" not in (await page.locator("main").inner_text()).lower()


async def test_a_waiting_retry_says_when_in_the_dashboard_and_the_portal(
    api: Api, receiver: Receiver, browser: Browser
) -> None:
    app, waiting, scheduled_id = await _waiting_delivery(api, receiver)
    status, scheduled, _ = await api.call("GET", f"/v1/deliveries/{scheduled_id}")
    assert status == 200
    next_attempt = f"Next attempt at {moment(waiting['next_attempt_at'])}."
    scheduled_for = f"Scheduled for {moment(scheduled['next_attempt_at'])}."
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()

    await sign_in(page, api)
    await page.goto(f"{api.base}/dashboard/applications/{app}/deliveries/{waiting['id']}")
    await expect(page.get_by_role("heading", name="Delivery")).to_be_visible()
    await _says(page, "p.pending", f"{next_attempt} This page follows it.")
    await expect(page.locator("table tbody tr")).to_have_count(1)  # the one failed attempt
    await screenshot(page, "40-waiting-for-its-retry")
    await page.goto(f"{api.base}/dashboard/applications/{app}/deliveries/{scheduled_id}")
    await _says(page, "p.pending", scheduled_for)
    await screenshot(page, "41-scheduled")
    await context.close()

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await page.goto(await portal_link(api, app, capabilities=EVERY))
    await expect(page.get_by_role("heading", name="Endpoints", exact=True)).to_be_visible()
    await page.goto(f"{api.base}/portal/deliveries/{waiting['id']}")
    await expect(page.get_by_role("heading", name="Message")).to_be_visible()
    await _says(page, "#attempts", f"{next_attempt} This part of the page follows it.")
    await shot(page, "20-waiting-for-its-retry")
    await page.goto(f"{api.base}/portal/deliveries/{scheduled_id}")
    await _says(page, "#attempts", scheduled_for)
    await shot(page, "21-scheduled")
    await context.close()
