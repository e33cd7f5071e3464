"""``webhook-service applications portal-link`` and ``portal-revoke`` (issue 17), run as a
subprocess against the API on a real socket: the link it prints opens that application's
portal in a client of its own, and revoking ends the session that link opened."""

from __future__ import annotations

import uuid

import aiohttp

from tests.integration.conftest import Api
from tests.integration.test_admin_cli import cli
from tests.integration.test_applications import new_app
from tests.support.apikeys import make_key
from webhook_service.timeutil import now_ms, parse_iso


def _fields(out: str) -> dict[str, str]:
    """The ``label  value`` lines the command prints."""
    return dict(line.split(None, 1) for line in out.splitlines())


def _browser() -> aiohttp.ClientSession:
    # A cookie jar of its own, as a subscriber's browser; unsafe: the API is at 127.0.0.1,
    # whose cookies aiohttp's jar refuses otherwise.
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def test_the_printed_link_opens_the_portal_until_revoked(api: Api) -> None:
    tag = uuid.uuid4().hex[:8]
    app = await new_app(api, f"Cli Portal {tag}", uid=f"cli-portal-{tag}")
    before = now_ms()
    made = await cli(
        api, "applications", "portal-link", app["uid"], "--expires-in", "600",
        "--capability", "retry", "--capability", "view_secrets",
    )  # fmt: skip
    assert made.code == 0, made.err
    printed = _fields(made.out)
    assert printed["capabilities"] == "retry, view, view_secrets"
    assert printed["url"].startswith(f"{api.base}/portal/enter?token=whp_{app['id']}.")
    expires = parse_iso(printed["expires"].replace(" ", "T"))
    assert before + 599_000 <= expires <= now_ms() + 600_000
    assert "portal-revoke" in made.err

    async with _browser() as browser:
        async with browser.get(printed["url"]) as page:
            assert page.status == 200, await page.text()
            assert page.url.path == "/portal" and "token" not in page.url.query
            assert app["name"] in await page.text()

        revoked = await cli(api, "applications", "portal-revoke", app["uid"])
        assert revoked.code == 0, revoked.err
        assert app["uid"] in revoked.out

        # The open session ends, and the link opens no new one.
        async with browser.get(api.base + "/portal", allow_redirects=False) as page:
            assert page.status == 401
            assert app["name"] not in await page.text()
        async with browser.get(printed["url"], allow_redirects=False) as page:
            assert page.status == 401


async def test_json_read_only_and_refusals(api: Api) -> None:
    app = await new_app(api, "Cli Portal json")
    answer = (
        await cli(api, "applications", "portal-link", app["id"], "--read-only", "--json")
    ).json()
    assert set(answer) == {"url", "token", "expires_at", "capabilities"}
    assert answer["capabilities"] == ["view"] and answer["token"] in answer["url"]
    # The default hour.
    assert abs(parse_iso(answer["expires_at"]) - (now_ms() + 3_600_000)) < 120_000

    out_of_bounds = await cli(api, "applications", "portal-link", app["id"], "--expires-in", "59")
    assert out_of_bounds.code == 2 and "between 60 and 604800" in out_of_bounds.err
    unknown = await cli(api, "applications", "portal-link", app["id"], "--capability", "admin")
    assert unknown.code == 2 and "invalid choice" in unknown.err

    reader = await make_key(api, ["applications:read"])
    refused = await cli(api, "applications", "portal-link", app["id"], key=reader["key"])
    assert refused.code == 1 and "403" in refused.err
    refused = await cli(api, "applications", "portal-revoke", app["id"], key=reader["key"])
    assert refused.code == 1 and "403" in refused.err
