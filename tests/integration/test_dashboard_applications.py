"""The dashboard's applications (issue 16 item 10), as a person uses them: Debian's
Chromium, driven by Playwright, against the API on a real socket with real workers.

The list of applications with each one's health and volume; one application's pages, named
in their header and breadcrumbs, on its nested API routes; a retry from within it; and a key
bound to one application, which sees its own and finds every page of another missing."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import Browser, Page, expect

from tests.integration.conftest import Api, wait_for
from tests.integration.test_applications import TENANT_SCOPES, app_endpoint, app_event, new_app
from tests.integration.test_dashboard import accept, browser, screenshot, sign_in
from tests.support.apikeys import make_key
from tests.support.receiver import Receiver

# On SQLite alone, as test_dashboard.py (the history tests check the API on both logs).

__all__ = ["browser"]  # the fixture, shared with test_dashboard.py

TYPE = "dash.app"
# The Applications table's columns (application_pages.HEADERS).
HEALTH, ENDPOINTS, DISABLED, FAILING = 2, 3, 4, 5
HOUR_DELIVERIES, HOUR_SUCCESS, DAY_DELIVERIES, BACKLOG = 7, 8, 9, 11


async def _stats(api: Api, app: str, endpoint: dict[str, Any]) -> dict[str, Any]:
    status, stats, _ = await api.call(
        "GET", f"/v1/applications/{app}/endpoints/{endpoint['id']}/stats"
    )
    assert status == 200, stats
    found: dict[str, Any] = stats
    return found


async def _listed(api: Api, app: str, query: str) -> list[dict[str, Any]]:
    """The application's deliveries as the dashboard lists them: from the log."""
    status, page, _ = await api.call("GET", f"/v1/applications/{app}/deliveries?{query}")
    assert status == 200, page
    found: list[dict[str, Any]] = page["data"]
    return found


async def _two_applications(api: Api, receiver: Receiver, tag: str) -> dict[str, Any]:
    """Acme: one healthy endpoint, one failing every attempt, one disabled; two events.
    Beta: one healthy endpoint, one event. Returned once every figure is counted and the
    log lists every delivery."""
    acme = await new_app(api, f"Acme {tag}", uid=f"acme-{tag}")
    beta = await new_app(api, f"Beta {tag}", uid=f"beta-{tag}")
    healed = {"yes": False}
    receiver.behaviours[f"bad-{tag}"] = lambda _name, _n: 200 if healed["yes"] else 500
    good = await app_endpoint(api, receiver, acme["id"], f"ok-{tag}", [TYPE])
    bad = await app_endpoint(api, receiver, acme["id"], f"bad-{tag}", [TYPE])
    status, off, _ = await api.call(
        "POST",
        f"/v1/applications/{acme['id']}/endpoints",
        json={"url": receiver.url(f"off-{tag}"), "event_types": [TYPE], "disabled": True},
    )
    assert status == 201, off
    theirs = await app_endpoint(api, receiver, beta["id"], f"beta-{tag}", [TYPE])
    for n in range(2):
        await app_event(api, acme["id"], TYPE, {"n": n})
    beta_event = await app_event(api, beta["id"], TYPE, {"n": 0})

    async def settled() -> bool:
        ok, failing, other = (
            await _stats(api, acme["id"], good),
            await _stats(api, acme["id"], bad),
            await _stats(api, beta["id"], theirs),
        )
        return (
            ok["last_hour"]["succeeded"] == 2
            and failing["last_hour"]["failed"] == 2
            and other["last_hour"]["succeeded"] == 1
            and len(await _listed(api, acme["id"], "status=failed")) == 2
            and len(await _listed(api, beta["id"], "status=succeeded")) == 1
        )

    await wait_for(settled)
    _, event, _ = await api.call("GET", f"/v1/applications/{beta['id']}/events/{beta_event['id']}")
    return {
        "acme": acme, "beta": beta, "good": good, "bad": bad, "off": off, "theirs": theirs,
        "beta_delivery": event["deliveries"][0]["id"], "healed": healed,
    }  # fmt: skip


def _row(page: Page, name: str) -> Any:
    return page.locator("tbody tr").filter(has_text=name)


async def _cell(page: Page, name: str, column: int, text: str) -> None:
    await expect(_row(page, name).locator("td").nth(column)).to_have_text(text)


async def test_applications_their_pages_and_a_retry_within_one(
    api: Api, receiver: Receiver, browser: Browser
) -> None:
    made = await _two_applications(api, receiver, "list")
    acme, beta, bad = made["acme"], made["beta"], made["bad"]
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    page.on("dialog", accept)
    await sign_in(page, api)

    await (
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Applications").click()
    )
    await expect(page.get_by_role("heading", name="Applications")).to_be_visible()
    for column, text in (
        (HEALTH, "failing"), (ENDPOINTS, "3"), (DISABLED, "1"), (FAILING, "1"),
        (HOUR_DELIVERIES, "4"), (HOUR_SUCCESS, "50.0%"), (DAY_DELIVERIES, "4"), (BACKLOG, "0"),
    ):  # fmt: skip
        await _cell(page, acme["name"], column, text)
    for column, text in (
        (HEALTH, "healthy"), (ENDPOINTS, "1"), (DISABLED, "0"), (FAILING, "0"),
        (HOUR_DELIVERIES, "1"), (HOUR_SUCCESS, "100.0%"), (BACKLOG, "0"),
    ):  # fmt: skip
        await _cell(page, beta["name"], column, text)
    await expect(_row(page, acme["name"]).get_by_text(acme["uid"])).to_be_visible()
    await screenshot(page, "11-applications")

    # One application's endpoints: its name in the header and the breadcrumbs.
    await _row(page, acme["name"]).get_by_role("link", name=acme["name"]).click()
    await expect(page).to_have_url(re.compile(rf"/dashboard/applications/{acme['id']}$"))
    await expect(page.get_by_role("heading", name="Endpoints", exact=True)).to_be_visible()
    await expect(page.locator("header .application")).to_contain_text(acme["name"])
    crumbs = page.get_by_role("navigation", name="Breadcrumb")
    await expect(crumbs.get_by_role("link")).to_have_text(["Applications", acme["name"]])
    await expect(page.locator("tbody tr")).to_have_count(3)
    await expect(page.get_by_text(made["theirs"]["id"])).to_have_count(0)
    await screenshot(page, "12-application-endpoints")

    await page.get_by_role("link", name=bad["id"]).click()
    await expect(page).to_have_url(
        re.compile(rf"/dashboard/applications/{acme['id']}/endpoints/{bad['id']}$")
    )
    await expect(page.get_by_role("heading", name=bad["id"])).to_be_visible()
    await expect(crumbs.get_by_role("link")).to_have_text(
        ["Applications", acme["name"], "Endpoints"]
    )
    await expect(page.locator("dd .badge").first).to_have_text("failing")
    await screenshot(page, "13-application-endpoint")

    await page.get_by_role("link", name="Its failed deliveries").click()
    await expect(page).to_have_url(
        re.compile(rf"/dashboard/applications/{acme['id']}/deliveries\?")
    )
    rows = page.locator("tbody tr")
    await expect(rows).to_have_count(2)
    # Within an application every delivery is its own: no column says whose.
    await expect(page.get_by_role("columnheader", name="Application")).to_have_count(0)
    await rows.first.get_by_role("link").first.click()
    await expect(page).to_have_url(
        re.compile(rf"/dashboard/applications/{acme['id']}/deliveries/dlv_[^/]+$")
    )
    delivery_id = page.url.rsplit("/", 1)[1]
    await expect(page.get_by_role("heading", name="Delivery", exact=True)).to_be_visible()
    await expect(page.locator("header .application")).to_contain_text(acme["name"])
    await expect(crumbs.get_by_role("link")).to_have_text(
        ["Applications", acme["name"], "Deliveries"]
    )
    attempts = page.locator("table tbody tr")
    await expect(attempts).to_have_count(4)
    await screenshot(page, "14-application-delivery")

    # A retry from within the application, through its nested route.
    made["healed"]["yes"] = True
    await page.get_by_role("button", name="Retry now").click()
    await expect(page).to_have_url(
        re.compile(rf"/dashboard/applications/{acme['id']}/deliveries/{delivery_id}\?done=retried")
    )
    await expect(page.locator("dd .badge").first).to_have_text("succeeded", timeout=30_000)
    await expect(attempts).to_have_count(5)
    status, delivery, _ = await api.call(
        "GET", f"/v1/applications/{acme['uid']}/deliveries/{delivery_id}"
    )
    assert status == 200 and delivery["status"] == "succeeded", delivery
    received = receiver.for_endpoint("bad-list")
    assert received[-1].status == 200 and all(r.verified for r in received)
    await screenshot(page, "15-application-retried")

    # The operator's flat list covers every application, and says whose each delivery is.
    theirs = made["theirs"]["id"]
    await page.goto(api.base + f"/dashboard/deliveries?endpoint_id={theirs}")
    await expect(page.get_by_role("columnheader", name="Application")).to_be_visible()
    link = page.locator("tbody tr").first.get_by_role("link", name=beta["id"])
    await expect(link).to_have_attribute("href", f"/dashboard/applications/{beta['id']}")
    endpoint_link = page.locator("tbody tr").first.get_by_role("link", name=theirs)
    href = f"/dashboard/applications/{beta['id']}/endpoints/{theirs}"
    await expect(endpoint_link).to_have_attribute("href", href)
    await page.close()


async def test_a_key_bound_to_one_application_sees_only_its_own(
    api: Api, receiver: Receiver, browser: Browser
) -> None:
    made = await _two_applications(api, receiver, "bound")
    acme, beta = made["acme"], made["beta"]
    bound = await make_key(api, TENANT_SCOPES, application=acme["id"])
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    await sign_in(page, api, bound["key"])
    # The flat pages act on its own application.
    await expect(page.get_by_role("link", name=made["good"]["id"])).to_be_visible()
    await expect(page.get_by_text(made["theirs"]["id"])).to_have_count(0)

    await (
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Applications").click()
    )
    await expect(page.locator("tbody tr")).to_have_count(1)
    await _cell(page, acme["name"], ENDPOINTS, "3")
    await expect(page.get_by_text(beta["name"])).to_have_count(0)
    await screenshot(page, "16-bound-applications")

    own = f"/dashboard/applications/{acme['id']}"
    for path in (own, f"{own}/endpoints/{made['bad']['id']}", f"{own}/deliveries"):
        response = await page.goto(api.base + path)
        assert response is not None and response.status == 200, path

    other = f"/dashboard/applications/{beta['id']}"
    by_uid = f"/dashboard/applications/{beta['uid']}"
    theirs, delivery = made["theirs"]["id"], made["beta_delivery"]
    for path in (
        other, by_uid, f"{other}/endpoints/{theirs}", f"{other}/deliveries",
        f"{other}/deliveries/{delivery}", f"{by_uid}/deliveries/{delivery}",
        # Another application's records by id on its own pages, and on the flat ones.
        f"{own}/endpoints/{theirs}", f"{own}/deliveries/{delivery}",
        f"/dashboard/endpoints/{theirs}", f"/dashboard/deliveries/{delivery}",
    ):  # fmt: skip
        response = await page.goto(api.base + path)
        assert response is not None and response.status == 404, path
        assert beta["name"] not in await page.content(), path
    await screenshot(page, "17-bound-other-application")

    # Nor can its forms act there: a retry of the other's delivery is the API's 404 too.
    await page.goto(api.base + own)
    token = await page.locator('input[name="csrf"]').first.get_attribute("value")
    assert token is not None
    for path in (f"{other}/deliveries/{delivery}/retry", f"{own}/deliveries/{delivery}/retry"):
        answer = await page.request.post(api.base + path, form={"csrf": token}, max_redirects=0)
        assert answer.status == 404, path
    await page.close()
