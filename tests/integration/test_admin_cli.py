"""The admin command line, run as a subprocess against the API on a real socket, with real
workers delivering to a real receiver."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import sys
import uuid
from dataclasses import dataclass
from typing import Any

from tests.integration.conftest import Api, create_endpoint, delivery_statuses, wait_for
from tests.integration.test_applications import app_endpoint, app_event, new_app
from tests.support.apikeys import make_key
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY

# The command line is a client of the API: which log backend answers it is the history
# tests' concern (tests/integration/history/, on both), so this runs on SQLite alone.

CLI_TIMEOUT = 120


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.code == 0, self.err
        return json.loads(self.out)


async def cli(api: Api, *args: str, key: str | None = ADMIN_KEY, stderr: int | None = None) -> Run:
    """``webhook-service ARGS`` with the API's address and the key in its environment.

    Asynchronous on purpose: the API answering it runs on this test's own event loop."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOK_")}
    env["WEBHOOK_API_URL"] = api.base
    if key is not None:
        env["WEBHOOK_API_KEY"] = key
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webhook_service", *args, env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE if stderr is None else stderr,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), CLI_TIMEOUT)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), (err or b"").decode())


async def failed_delivery(api: Api, receiver: Receiver, name: str) -> tuple[str, str, str]:
    """An endpoint whose receiver answers 500 and an event whose delivery failed for good."""
    receiver.behaviours[name] = lambda _name, _n: 500
    endpoint = await create_endpoint(api, receiver, name, [f"cli.{name}"])
    sent = await cli(api, "events", "send", f"cli.{name}", '{"n": 1}', "--json")
    event_id = sent.json()["id"]

    async def failed() -> bool:
        # As the lists read it: the log has its last state, and every attempt with it.
        query = f"/v1/deliveries?endpoint_id={endpoint['id']}&status=failed"
        _, page, _ = await api.call("GET", query)
        return bool(page["data"])

    await wait_for(failed)
    _, event, _ = await api.call("GET", f"/v1/events/{event_id}")
    return endpoint["id"], event_id, event["deliveries"][0]["id"]


def heal(receiver: Receiver, name: str) -> None:
    receiver.behaviours[name] = lambda _name, _n: 200


async def test_endpoints_from_creation_to_rotation(api: Api, receiver: Receiver) -> None:
    created = (
        await cli(api, "endpoints", "create", receiver.url("cli-ep"), "--type", "cli.a",
                  "--type", "cli.b", "--description", "made by the CLI", "--json")
    ).json()  # fmt: skip
    api.created_endpoints.append(created["id"])
    assert created["event_types"] == ["cli.a", "cli.b"] and created["secret"].startswith("whsec_")

    listing = await cli(api, "endpoints", "list", "--limit", "250")
    assert listing.code == 0, listing.err
    header, *rows = listing.out.splitlines()
    assert header.split() == ["ID", "APPLICATION", "URL", "STATE", "TYPES", "CREATED"]
    (row,) = [r for r in rows if r.startswith(created["id"])]
    # Aligned: every column starts where its title does.
    for title in ("APPLICATION", "URL", "STATE", "TYPES", "CREATED"):
        assert row[header.index(title) - 2 : header.index(title)] == "  ", (title, row)
    assert row[header.index("STATE") :].startswith("enabled")
    assert row[header.index("APPLICATION") :].startswith(created["application"] + " ")

    shown = await cli(api, "endpoints", "show", created["id"])
    assert "description  made by the CLI" in shown.out and "cli.a, cli.b" in shown.out
    assert (await cli(api, "endpoints", "disable", created["id"], "--json")).json()["disabled"]
    disabled = await cli(api, "endpoints", "show", created["id"])
    assert "disabled (manual)" in disabled.out
    assert not (await cli(api, "endpoints", "enable", created["id"], "--json")).json()["disabled"]

    rotated = (
        await cli(api, "endpoints", "rotate-secret", created["id"], "--grace-period", "60",
                  "--json")
    ).json()  # fmt: skip
    assert rotated["secret"] != created["secret"] and len(rotated["previous_keys"]) == 1
    _, secret, _ = await api.call("GET", f"/v1/endpoints/{created['id']}/secret")
    assert secret["secret"] == rotated["secret"]


async def test_send_show_retry_and_replay_an_event(api: Api, receiver: Receiver) -> None:
    endpoint_id, event_id, delivery_id = await failed_delivery(api, receiver, "cli_one")

    shown = await cli(api, "events", "show", event_id)
    assert shown.code == 0 and delivery_id in shown.out and '"n": 1' in shown.out
    failed = (
        await cli(api, "deliveries", "list", "--status", "failed", "--endpoint", endpoint_id,
                  "--json")
    ).json()  # fmt: skip
    assert [d["id"] for d in failed["data"]] == [delivery_id]
    attempts = await cli(api, "deliveries", "show", delivery_id)
    assert attempts.out.count("answer 500") == 4 and "status        failed" in attempts.out
    assert "webhook-signature" not in attempts.out
    headers = (await cli(api, "deliveries", "show", delivery_id, "--headers")).out
    assert headers.count("webhook-signature") == 4
    assert len(re.findall(rf"^sent +webhook-id +{event_id}$", headers, re.MULTILINE)) == 4
    assert re.search(r"^answered +content-type +text/plain", headers, re.MULTILINE)

    heal(receiver, "cli_one")
    retried = (await cli(api, "deliveries", "retry", delivery_id, "--json")).json()
    assert retried["status"] == "pending"

    async def succeeded() -> bool:
        return (await delivery_statuses(api, event_id))[endpoint_id] == "succeeded"

    await wait_for(succeeded)
    replayed = (await cli(api, "events", "replay", event_id, "--endpoint", endpoint_id)).out
    assert replayed.splitlines()[0].split()[:3] == ["ID", "APPLICATION", "STATUS"]
    assert "pending" in replayed or "succeeded" in replayed

    history = await cli(api, "events", "list", "--type", "cli.cli_one", "--since", "1h")
    assert event_id in history.out


# A receiver's 500 body that, printed raw, erases the line, writes "200 OK" where the
# outcome was, and retitles the terminal.
HOSTILE = "\x1b[2K\r200 OK\x1b]0;pwned\x07"


async def test_a_hostile_receiver_cannot_steer_the_terminal(api: Api, receiver: Receiver) -> None:
    receiver.bodies["cli_hostile"] = HOSTILE
    _, _, delivery_id = await failed_delivery(api, receiver, "cli_hostile")

    shown = await cli(api, "deliveries", "show", delivery_id)
    assert shown.code == 0, shown.err
    for char in ("\x1b", "\x07", "\r"):
        assert char not in shown.out
    assert shown.out.count("\\x1b[2K\\r200 OK") == 4  # every attempt's answer, made visible
    assert "last outcome  500" in shown.out
    # --json keeps the value exactly, escaped as JSON.
    as_json = await cli(api, "deliveries", "show", delivery_id, "--json")
    assert "\x1b" not in as_json.out
    assert {a["response_body"] for a in as_json.json()["attempt_log"]} == {HOSTILE}


async def test_endpoint_header_values_only_for_keys_that_may_change_them(
    api: Api, receiver: Receiver
) -> None:
    token = "rcv-token-0123456789"
    created = (
        await cli(api, "endpoints", "create", receiver.url("cli-hdr"), "--header",
                  f"Authorization=Bearer {token}", "--json")
    ).json()  # fmt: skip
    api.created_endpoints.append(created["id"])
    by_admin = await cli(api, "endpoints", "show", created["id"])
    assert f"headers      Authorization: Bearer {token}" in by_admin.out
    reader = (await make_key(api, ["endpoints:read"]))["key"]
    shown = await cli(api, "endpoints", "show", created["id"], key=reader)
    assert shown.code == 0, shown.err
    assert "headers      Authorization: (needs endpoints:write)" in shown.out
    assert token not in shown.out
    as_json = (await cli(api, "endpoints", "show", created["id"], "--json", key=reader)).json()
    assert as_json["headers"] == {"Authorization": None}


async def test_bulk_retry_follows_its_job_with_a_progress_bar(api: Api, receiver: Receiver) -> None:
    endpoint_id, _, _ = await failed_delivery(api, receiver, "cli_bulk")
    for n in range(2, 4):
        await cli(api, "events", "send", "cli.cli_bulk", json.dumps({"n": n}))

    async def three_failed() -> bool:
        _, page, _ = await api.call(
            "GET", f"/v1/deliveries?endpoint_id={endpoint_id}&status=failed"
        )
        return len(page["data"]) == 3

    await wait_for(three_failed)
    heal(receiver, "cli_bulk")
    # A terminal on stderr: that is where the bar is drawn, and only there.
    leader, follower = pty.openpty()
    try:
        run = await cli(api, "deliveries", "retry", "--status", "failed", "--endpoint",
                        endpoint_id, stderr=follower)  # fmt: skip
        terminal = os.read(leader, 65536).decode()
    finally:
        os.close(leader)
        os.close(follower)
    assert run.code == 0
    assert "\r" in terminal and "re-sent 3 of 3 found" in terminal and "done" in terminal
    assert "state    done" in run.out and "re-sent  3" in run.out

    async def all_succeeded() -> bool:
        _, page, _ = await api.call(
            "GET", f"/v1/deliveries?endpoint_id={endpoint_id}&status=succeeded"
        )
        return len(page["data"]) == 3

    await wait_for(all_succeeded)


async def test_recover_and_stats(api: Api, receiver: Receiver) -> None:
    endpoint_id, event_id, _ = await failed_delivery(api, receiver, "cli_rec")
    heal(receiver, "cli_rec")
    job = (await cli(api, "endpoints", "recover", endpoint_id, "--since", "1h", "--json")).json()
    assert (job["kind"], job["state"], job["retried"]) == ("recover", "done", 1)

    async def recovered() -> bool:
        return (await delivery_statuses(api, event_id))[endpoint_id] == "succeeded"

    await wait_for(recovered)
    one = (await cli(api, "stats", endpoint_id, "--json")).json()
    assert one["endpoint_id"] == endpoint_id and one["last_success_at"]
    fleet = await cli(api, "stats")
    header = fleet.out.splitlines()[0].split()
    assert header[:3] == ["ENDPOINT", "URL", "HEALTH"]
    (row,) = [line for line in fleet.out.splitlines() if line.startswith(endpoint_id)]
    assert "healthy" in row or "degraded" in row


async def test_errors_say_what_went_wrong_and_exit_non_zero(api: Api) -> None:
    missing = await cli(api, "deliveries", "show", "dlv_nothing")
    assert (missing.code, missing.out) == (1, "")
    assert missing.err.startswith("error: 404")

    invalid = await cli(api, "deliveries", "list", "--attempts-min", "-1")
    assert invalid.code == 1 and "#/query/attempts_min" in invalid.err

    unfiltered = await cli(api, "deliveries", "retry")
    assert unfiltered.code == 2 and "--status failed" in unfiltered.err

    no_key = await cli(api, "endpoints", "list", key=None)
    assert no_key.code == 2 and "WEBHOOK_API_KEY" in no_key.err

    reader = (await make_key(api, ["endpoints:read"]))["key"]
    refused = await cli(api, "endpoints", "disable", "ep_x", key=reader)
    assert refused.code == 1 and "403" in refused.err and "endpoints:write" in refused.err

    wrong = await cli(api, "endpoints", "list", "--key", "wrong-key", "--url", api.base)
    assert wrong.code == 1 and "401" in wrong.err and "wrong-key" not in wrong.err

    nowhere = await cli(api, "endpoints", "list", "--url", "http://127.0.0.1:9")
    assert nowhere.code == 1 and "cannot reach the API" in nowhere.err


async def test_applications_from_creation_to_their_own_endpoints_and_events(
    api: Api, receiver: Receiver
) -> None:
    uid = f"cli-{uuid.uuid4().hex[:12]}"
    created = (
        await cli(api, "applications", "create", "CLI Tenant", "--uid", uid, "--metadata",
                  "plan=pro", "--metadata", "owner=ops", "--rate-limit", "50", "--json")
    ).json()  # fmt: skip
    app_id = created["id"]
    assert app_id.startswith("app_") and created["uid"] == uid
    assert created["metadata"] == {"plan": "pro", "owner": "ops"} and created["rate_limit"] == 50

    listing = await cli(api, "applications", "list", "--uid", uid)
    assert listing.code == 0, listing.err
    header, row = listing.out.splitlines()
    assert header.split()[:4] + header.split()[-2:] == ["ID", "UID", "NAME", "HEALTH", "RATE",
                                                         "LIMIT"]  # fmt: skip
    assert row.split()[:6] == [app_id, uid, "CLI", "Tenant", "no", "endpoints"]
    assert row.split()[-1] == "50/s"
    assert (await cli(api, "applications", "list", "--uid", "cli-nobody", "--json")).json()[
        "data"
    ] == []
    for ref in (uid, app_id):
        shown = await cli(api, "applications", "show", ref)
        assert shown.code == 0, shown.err
        assert (
            f"id            {app_id}" in shown.out
            and "metadata      plan=pro, owner=ops" in shown.out
        )
    updated = (
        await cli(api, "applications", "update", uid, "--name", "CLI Tenant 2",
                  "--no-rate-limit", "--json")
    ).json()  # fmt: skip
    assert (updated["name"], updated["rate_limit"], updated["uid"]) == ("CLI Tenant 2", None, uid)

    endpoint = (
        await cli(api, "endpoints", "create", receiver.url("cli-tenant"), "--type",
                  "cli.tenant", "--channel", "eu", "--app", uid, "--json")
    ).json()  # fmt: skip
    receiver.secrets.setdefault("cli-tenant", []).append(endpoint["secret"])
    assert endpoint["application"] == app_id and endpoint["channels"] == ["eu"]
    own = await cli(api, "endpoints", "list", "--app", uid, "--limit", "250")
    assert own.code == 0, own.err
    header, *rows = own.out.splitlines()
    assert header.split()[:3] == ["ID", "APPLICATION", "URL"]
    assert [r.split()[:2] for r in rows] == [[endpoint["id"], app_id]]
    # Not in the default application's list, nor found through its routes.
    flat = (await cli(api, "endpoints", "list", "--limit", "250", "--json")).json()
    assert endpoint["id"] not in {e["id"] for e in flat["data"]}
    elsewhere = await cli(api, "endpoints", "show", endpoint["id"])
    assert elsewhere.code == 1 and elsewhere.err.startswith("error: 404")
    assert (await cli(api, "endpoints", "show", endpoint["id"], "--app", app_id)).code == 0

    sent = (
        await cli(api, "events", "send", "cli.tenant", '{"n": 1}', "--app", uid, "--channel",
                  "eu", "--json")
    ).json()  # fmt: skip
    missing = await cli(api, "events", "send", "cli.tenant", "--app", f"{uid}-not-yet")
    assert missing.code == 1 and "error: 404" in missing.err

    async def delivered() -> bool:
        return await delivery_statuses(api, sent["id"]) == {endpoint["id"]: "succeeded"}

    await wait_for(delivered, timeout=60)
    events = await cli(api, "events", "list", "--app", uid)
    assert events.code == 0, events.err
    header, *rows = events.out.splitlines()
    assert header.split()[:3] == ["ID", "APPLICATION", "TYPE"]
    assert [r.split()[:3] for r in rows] == [[sent["id"], app_id, "cli.tenant"]]
    # Without --app the operator's view: every application's events, each one's named.
    everywhere = (await cli(api, "events", "list", "--type", "cli.tenant")).out
    assert [r.split()[:2] for r in everywhere.splitlines()[1:]] == [[sent["id"], app_id]]
    one = (await cli(api, "events", "show", sent["id"], "--app", uid)).out
    assert f"application  {app_id}" in one and "channels     eu" in one
    deliveries = (await cli(api, "deliveries", "list", "--app", uid, "--json")).json()
    assert [(d["application"], d["endpoint_id"]) for d in deliveries["data"]] == [
        (app_id, endpoint["id"])
    ]

    # Deleting it follows the job to its end: its endpoint goes with it, and so does it.
    deleted = (await cli(api, "applications", "delete", uid, "--json")).json()
    assert (deleted["kind"], deleted["state"], deleted["application"]) == (
        "delete-application", "done", app_id,
    )  # fmt: skip
    assert deleted["endpoints_deleted"] == 1
    gone = await cli(api, "applications", "show", uid)
    assert gone.code == 1 and gone.err.startswith("error: 404")


# `applications list`'s columns, as its header splits on white space (titles of two words
# are two), and where each application's figures stand in its row.
HEALTH_COLUMNS = [
    "ID", "UID", "NAME", "HEALTH", "ENDPOINTS", "DISABLED", "FAILING", "DELIVERED", "1H",
    "SUCCESS", "1H", "DELIVERED", "1D", "SUCCESS", "1D", "BACKLOG", "RATE", "LIMIT",
]  # fmt: skip


async def test_applications_list_each_ones_health_and_volume(api: Api, receiver: Receiver) -> None:
    """Two applications: Acme with an endpoint whose receiver answers 500 and a healthy
    one, Beta with a healthy one; an event to each endpoint. Acme is as healthy as its worst
    endpoint; the figures are there once the workers have added the attempts' counts (within
    WEBHOOK_COUNTS_INTERVAL)."""
    tag = uuid.uuid4().hex[:8]
    acme = await new_app(api, f"Acme {tag}", uid=f"acme-{tag}")
    beta = await new_app(api, f"Beta {tag}", uid=f"beta-{tag}")
    receiver.behaviours[f"hbad-{tag}"] = lambda _name, _n: 500
    good = await app_endpoint(api, receiver, acme["id"], f"hok-{tag}", ["cli.health"])
    bad = await app_endpoint(api, receiver, acme["id"], f"hbad-{tag}", ["cli.health"])
    theirs = await app_endpoint(api, receiver, beta["id"], f"hbeta-{tag}", ["cli.health"])
    await app_event(api, acme["id"], "cli.health", {"n": 1})
    await app_event(api, beta["id"], "cli.health", {"n": 1})

    async def counted() -> bool:
        attempts = {}
        for app, endpoint in ((acme, good), (acme, bad), (beta, theirs)):
            _, stats, _ = await api.call(
                "GET", f"/v1/applications/{app['id']}/endpoints/{endpoint['id']}/stats"
            )
            attempts[endpoint["id"]] = stats["last_hour"]["attempts"]
        # The failing one's every attempt (the stack's schedule: four), and its delivery final.
        return attempts == {good["id"]: 1, bad["id"]: 4, theirs["id"]: 1}

    await wait_for(counted)

    # Newest first, after app_default (its id sorts after every generated one): the two
    # newest are this test's.
    listing = await cli(api, "applications", "list", "--limit", "3")
    assert listing.code == 0, listing.err
    header, *rows = listing.out.splitlines()
    assert header.split() == HEALTH_COLUMNS
    by_id = {row.split()[0]: row for row in rows}
    assert {acme["id"], beta["id"]} <= set(by_id)
    rows = [by_id[acme["id"]], by_id[beta["id"]]]
    # Every column starts where its title does (numbers end where theirs ends).
    health_at = header.index("HEALTH")
    assert by_id[acme["id"]][health_at:].split()[:9] == [
        "failing", "2", "0", "1", "2", "50.0%", "2", "50.0%", "0",
    ]  # fmt: skip
    assert by_id[beta["id"]][health_at:].split()[:9] == [
        "healthy", "1", "0", "0", "1", "100.0%", "1", "100.0%", "0",
    ]  # fmt: skip
    end = header.index("BACKLOG") + len("BACKLOG")
    assert all(row[:end].endswith(" 0") for row in rows)

    as_json = (await cli(api, "applications", "list", "--uid", acme["uid"], "--json")).json()
    (listed,) = as_json["data"]
    assert listed["health"] == {
        "status": "failing", "endpoints": 2, "disabled": 0, "failing": 1,
        "last_hour": {"deliveries": 2, "succeeded": 1, "failed": 1, "success_rate": 0.5},
        "last_day": {"deliveries": 2, "succeeded": 1, "failed": 1, "success_rate": 0.5},
        "backlog": 0,
    }  # fmt: skip

    shown = await cli(api, "applications", "show", beta["uid"])
    assert shown.code == 0, shown.err
    for line in ("health        healthy", "endpoints     1", "failing       0",
                 "delivered 1h  1", "success 1h    100.0%", "backlog       0"):  # fmt: skip
        assert line in shown.out.splitlines(), (line, shown.out)
    assert (await cli(api, "applications", "show", acme["id"], "--json")).json()[
        "health"
    ] == listed["health"]

    # Without deliveries:read: the endpoints counted, no figure made up.
    reader = (await make_key(api, ["applications:read", "endpoints:read"]))["key"]
    counts = await cli(api, "applications", "list", "--uid", acme["uid"], key=reader)
    assert counts.code == 0, counts.err
    _, row = counts.out.splitlines()
    assert row[health_at:].split()[:9] == ["-", "2", "0", "-", "-", "-", "-", "-", "-"]
    # Without endpoints:read either: the applications still list, their figures unknown.
    names = (await make_key(api, ["applications:read"]))["key"]
    unknown = (await cli(api, "applications", "list", "--uid", acme["uid"], "--json",
                         key=names)).json()  # fmt: skip
    assert set(unknown["data"][0]["health"].values()) == {None}
