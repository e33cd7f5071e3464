"""An endpoint's filter shown and used by people: the command line sets, clears and tests
it (a subprocess against the API on a real socket), and the dashboard's endpoint page
shows it among the endpoint's facts."""

from __future__ import annotations

import html
import json

import aiohttp
import pytest

from tests.integration.conftest import Api
from tests.integration.test_admin_cli import cli
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY

pytestmark = pytest.mark.integration

WANTED = '{"data.amount":{"$gte":100}}'


async def test_the_cli_sets_tests_and_clears_a_filter(api: Api, receiver: Receiver) -> None:
    created = (
        await cli(api, "endpoints", "create", receiver.url("cli-f"), "--filter", WANTED, "--json")
    ).json()
    api.created_endpoints.append(created["id"])
    assert created["filter"] == json.loads(WANTED)
    shown = await cli(api, "endpoints", "show", created["id"])
    assert f"filter       {WANTED}" in shown.out, shown.out

    small = await cli(
        api, "endpoints", "test-filter", created["id"], "--type", "a.b", "--data", '{"amount": 5}'
    )
    assert small.code == 0, small.err
    lines = [line.split(None, 1) for line in small.out.splitlines()]
    assert ["matches", "no"] in lines and ["clause", "data.amount $gte 100"] in lines, small.out
    large = await cli(
        api, "endpoints", "test-filter", created["id"], "--type", "a.b",
        "--data", '{"amount": 500}', "--channel", "eu", "--json",
    )  # fmt: skip
    assert large.json()["matches"] is True

    refused = await cli(api, "endpoints", "update", created["id"], "--filter", '{"$gt": 1}')
    assert refused.code != 0 and "/filter/$gt" in refused.err, refused.err
    not_json = await cli(api, "endpoints", "update", created["id"], "--filter", "[1]")
    assert not_json.code != 0 and "not a JSON object" in not_json.err
    cleared = (await cli(api, "endpoints", "update", created["id"], "--no-filter", "--json")).json()
    assert cleared["filter"] is None


async def test_the_dashboard_shows_the_filter(api: Api, receiver: Receiver) -> None:
    status, created, _ = await api.call(
        "POST", "/v1/endpoints", json={"url": receiver.url("dash-f"), "filter": json.loads(WANTED)}
    )
    assert status == 201, created
    api.created_endpoints.append(created["id"])
    base = api.base + "/dashboard"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        async with client.post(base + "/login", data={"key": ADMIN_KEY}) as signed_in:
            assert signed_in.status == 200
        async with client.get(f"{base}/endpoints/{created['id']}") as page:
            assert page.status == 200
            text = html.unescape(await page.text())
    assert f"<dt>Filter</dt><dd>{WANTED}</dd>" in text
