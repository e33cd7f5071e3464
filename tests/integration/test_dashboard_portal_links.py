"""The dashboard's side of the subscriber portal (issue 17), in Debian's Chromium as
test_dashboard_applications.py: a portal link made on an application's page opens that
application's portal in another browser context, until "Revoke every link"; a key without
applications:write gets no form and the API's 403; a key bound to an application makes its
own from the flat page; and the Event types page lists the catalog."""

from __future__ import annotations

import re
import uuid

from playwright.async_api import Browser, Locator, Page, ViewportSize, expect

from tests.integration.conftest import Api
from tests.integration.test_applications import new_app
from tests.integration.test_dashboard import accept, browser, screenshot, sign_in
from tests.support.apikeys import make_key

# On SQLite alone, as test_dashboard.py: nothing here reads the log.

__all__ = ["browser"]  # the fixture, shared with test_dashboard.py

VIEWPORT: ViewportSize = {"width": 1400, "height": 900}
REVOKED = "Every portal link and portal session of this application has ended."


def _main_nav(page: Page, name: str) -> Locator:
    return page.get_by_role("navigation", name="Main").get_by_role("link", name=name)


async def _make_link(page: Page) -> str:
    """Press "Make a portal link" with the form as it stands; the link it shows once."""
    await page.get_by_role("button", name="Make a portal link").click()
    await expect(page.get_by_role("heading", name="Subscriber portal")).to_be_visible()
    link = await page.get_by_label("Portal link").input_value()
    assert "/portal/enter?token=whp_" in link
    return link


async def test_a_link_made_on_the_application_page_opens_its_portal_until_revoked(
    api: Api, browser: Browser
) -> None:
    tag = uuid.uuid4().hex[:8]
    acme = await new_app(api, f"Acme Portal {tag}", uid=f"acme-portal-{tag}")
    page = await browser.new_page(viewport=VIEWPORT)
    page.on("dialog", accept)
    await sign_in(page, api)

    await page.goto(api.base + f"/dashboard/applications/{acme['id']}")
    await _main_nav(page, "Portal links").click()
    await expect(page).to_have_url(
        re.compile(rf"/dashboard/applications/{acme['id']}/portal-links$")
    )
    await expect(page.locator("header .application")).to_contain_text(acme["name"])
    # The API's defaults: every capability but view_secrets; view always, not a choice.
    view = page.locator('input[name="capabilities"][value="view"]')
    await expect(view).to_be_checked()
    await expect(view).to_be_disabled()
    for name in ("manage_endpoints", "rotate_secrets", "retry", "send_examples"):
        await expect(page.locator(f'input[name="capabilities"][value="{name}"]')).to_be_checked()
    secrets = page.locator('input[name="capabilities"][value="view_secrets"]')
    await expect(secrets).not_to_be_checked()
    await expect(page.get_by_label("Opens the portal for")).to_have_value("3600")
    await screenshot(page, "30-portal-links")

    await secrets.check()
    await page.locator('input[name="capabilities"][value="send_examples"]').uncheck()
    await page.get_by_label("Opens the portal for").select_option(label="1 day")
    link = await _make_link(page)
    facts = page.locator("dl.facts")
    await expect(facts).to_contain_text(
        "manage_endpoints, retry, rotate_secrets, view, view_secrets"
    )
    await screenshot(page, "31-portal-link-made")

    # The subscriber's browser: a context of its own, no dashboard session in it.
    subscriber = await browser.new_context(viewport=VIEWPORT)
    portal = await subscriber.new_page()
    entered = await portal.goto(link)
    assert entered is not None and entered.status == 200
    await expect(portal).to_have_url(re.compile(r"/portal$"))
    await expect(portal.get_by_text(acme["name"]).first).to_be_visible()
    await screenshot(portal, "32-portal-from-dashboard-link")

    await page.goto(api.base + f"/dashboard/applications/{acme['id']}/portal-links")
    await page.get_by_role("button", name="Revoke every link").click()
    await expect(page).to_have_url(re.compile(r"/portal-links\?done=revoked$"))
    await expect(page.get_by_role("status")).to_have_text(REVOKED)
    await screenshot(page, "33-portal-links-revoked")

    # The session the link opened has ended, and the link opens none.
    reloaded = await portal.reload()
    assert reloaded is not None and reloaded.status == 401
    await expect(portal.get_by_text(acme["name"])).to_have_count(0)
    again = await portal.goto(link)
    assert again is not None and again.status == 401
    await screenshot(portal, "34-portal-link-revoked")
    await subscriber.close()
    await page.close()


async def test_a_key_without_applications_write_gets_no_form_and_the_apis_403(
    api: Api, browser: Browser
) -> None:
    acme = await new_app(api, "Acme Portal reader")
    reader = await make_key(api, ["applications:read", "endpoints:read"])
    page = await browser.new_page(viewport=VIEWPORT)
    await sign_in(page, api, reader["key"])
    here = api.base + f"/dashboard/applications/{acme['id']}/portal-links"
    await page.goto(here)
    await expect(page.get_by_text("may not make portal links")).to_be_visible()
    await expect(page.get_by_role("button", name="Make a portal link")).to_have_count(0)
    await expect(page.get_by_role("button", name="Revoke every link")).to_have_count(0)
    await screenshot(page, "35-portal-links-not-allowed")

    # Posting anyway, with the session's own form token: the API refuses.
    token = await page.locator('input[name="csrf"]').first.get_attribute("value")
    assert token is not None
    for path in (here, here + "/revoke"):
        answer = await page.request.post(path, form={"csrf": token}, max_redirects=0)
        assert answer.status == 403, path
    # And without the token, whoever the key: refused before the API is asked.
    answer = await page.request.post(here, form={"capabilities": "retry"}, max_redirects=0)
    assert answer.status == 403
    await page.close()


async def test_a_bound_key_makes_its_own_applications_link_on_the_flat_page(
    api: Api, browser: Browser
) -> None:
    tag = uuid.uuid4().hex[:8]
    acme = await new_app(api, f"Acme Bound {tag}")
    beta = await new_app(api, f"Beta Bound {tag}")
    bound = await make_key(
        api, ["applications:read", "applications:write", "endpoints:read"],
        application=acme["id"],
    )  # fmt: skip
    page = await browser.new_page(viewport=VIEWPORT)
    await sign_in(page, api, bound["key"])
    await _main_nav(page, "Portal links").click()
    await expect(page).to_have_url(re.compile(r"/dashboard/portal-links$"))
    await page.get_by_label("read-only").check()
    link = await _make_link(page)
    await expect(page.locator("dl.facts")).to_contain_text("view")
    await expect(page.locator("dl.facts")).not_to_contain_text("retry")
    assert f"token=whp_{acme['id']}." in link

    subscriber = await browser.new_context(viewport=VIEWPORT)
    portal = await subscriber.new_page()
    await portal.goto(link)
    await expect(portal.get_by_text(acme["name"]).first).to_be_visible()
    await subscriber.close()

    # Another application's page is the API's 404, and makes nothing.
    answer = await page.goto(api.base + f"/dashboard/applications/{beta['id']}/portal-links")
    assert answer is not None and answer.status == 404
    assert beta["name"] not in await page.content()
    await page.close()


async def test_the_event_types_page_lists_the_catalog(api: Api, browser: Browser) -> None:
    tag = uuid.uuid4().hex[:8]
    # Early in the catalog's name order, so on its first page whatever other tests made.
    listed, archived = f"a0_dash.listed_{tag}", f"a0_dash.archived_{tag}"
    for name in (listed, archived):
        status, made, _ = await api.call(
            "POST",
            "/v1/event-types",
            json={
                "name": name,
                "description": f"An invoice was paid ({tag})",
                "group": "Billing",
                "deprecated": name == listed,
                "schema": {"type": "object", "properties": {"amount_cents": {"type": "integer"}}},
                "examples": [{"amount_cents": 4200}],
            },
        )
        assert status == 201, made
    status, _, _ = await api.call("DELETE", f"/v1/event-types/{archived}")
    assert status in (200, 204)

    page = await browser.new_page(viewport=VIEWPORT)
    await sign_in(page, api)
    await _main_nav(page, "Event types").click()
    await expect(page).to_have_url(re.compile(r"/dashboard/event-types$"))
    await expect(page.get_by_role("heading", name="Event types")).to_be_visible()
    item = page.locator("li.event-type").filter(has_text=listed)
    await expect(item).to_contain_text(f"An invoice was paid ({tag})")
    await expect(item).to_contain_text("Billing")
    await expect(item.locator(".badge")).to_have_text("deprecated")
    schema = item.locator("details").filter(has_text="Schema of its data")
    await expect(schema.locator("pre")).not_to_be_visible()
    await schema.locator("summary").click()
    await expect(schema.locator("pre")).to_contain_text("amount_cents")
    example = item.locator("details").filter(has_text="Example data")
    await example.locator("summary").click()
    await expect(example.locator("pre")).to_contain_text("4200")
    await expect(page.get_by_text(archived)).to_have_count(0)
    await screenshot(page, "36-event-types")

    await page.get_by_role("link", name="Show the archived types too").click()
    await expect(page.get_by_role("heading", name="Archived")).to_be_visible()
    gone = page.locator("h2:has-text('Archived') ~ ul li.event-type").filter(has_text=archived)
    await expect(gone).to_have_count(1)
    await expect(
        page.locator("h2:has-text('Archived') ~ ul li.event-type").filter(has_text=listed)
    ).to_have_count(0)
    await screenshot(page, "37-event-types-archived")
    await page.close()
