"""The admin commands' arguments, as the requests they become: applications, and --app on
the endpoint, event and delivery commands (nested routes) or not (flat routes).

Every command runs whole (parse, connect, call, print) against aioresponses standing in for
the API, so what is checked is the method, the path and the body that reach the wire."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aioresponses import aioresponses
from yarl import URL

from tests.support.mock_http import CompatResponse
from webhook_service.admin import cli
from webhook_service.admin.application_commands import changes
from webhook_service.admin.tables import width

BASE = "http://api.test:8000"
ANY = re.compile(r"^http://api\.test:8000/.*$")
APP = {
    "id": "app_01JAPP",
    "name": "Acme",
    "uid": "acme",
    "metadata": {"plan": "pro"},
    "rate_limit": 5.0,
    "created_at": "2026-01-31T12:00:00.000Z",
    "updated_at": "2026-01-31T12:00:00.000Z",
}
ENDPOINT: dict[str, Any] = {
    "id": "ep_1", "application": "app_01JAPP", "url": "https://example.com/h", "description": "",
    "event_types": None, "channels": ["eu"], "disabled": False, "disabled_reason": None,
    "disabled_at": None, "headers": {}, "rate_limit": None, "operations": False,
    "signature": "hmac", "public_key": None, "created_at": "2026-01-31T12:00:00.000Z",
    "updated_at": "2026-01-31T12:00:00.000Z",
}  # fmt: skip
JOB = {"id": "job_1", "kind": "retry", "state": "running", "matched": 0, "retried": 0}


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(prog="webhook-service")
    cli.register(made.add_subparsers(dest="command", required=True))
    return made


def parse(*argv: str) -> argparse.Namespace:
    return parser().parse_args([*argv, "--url", BASE, "--key", "k"])


@pytest.fixture
def http() -> Iterator[aioresponses]:
    with aioresponses() as mocked:
        yield mocked


def answer(http: aioresponses, method: str, payload: Any, status: int = 200) -> None:
    http.add(
        ANY, method, status=status, payload=payload, repeat=True, response_class=CompatResponse
    )


def requests(http: aioresponses) -> list[tuple[str, str, Any]]:
    """(method, path and query as sent, JSON body) of every request made, in order."""
    made = []
    for (method, url), calls in http.requests.items():
        for call in calls:
            data = call.kwargs.get("data")
            sent = URL(str(url), encoded=True)
            query = call.kwargs.get("params") or {}
            target = sent.raw_path + (
                "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
            )
            made.append((method, target, orjson.loads(data) if data else None))
    return made


def run(*argv: str) -> int:
    return cli.run(parse(*argv))


def test_create_sends_only_what_was_given(http: aioresponses) -> None:
    answer(http, "POST", APP, 201)
    assert run("applications", "create", "Acme") == 0
    assert run(
        "applications", "create", "Acme", "--uid", "acme", "--metadata", "plan=pro",
        "--metadata", "note=a=b", "--rate-limit", "5",
    ) == 0  # fmt: skip
    assert requests(http) == [
        ("POST", "/v1/applications", {"name": "Acme"}),
        (
            "POST",
            "/v1/applications",
            {"name": "Acme", "uid": "acme", "metadata": {"plan": "pro", "note": "a=b"},
             "rate_limit": 5.0},
        ),
    ]  # fmt: skip


def route(http: aioresponses, path: str, payload: Any, status: int = 200) -> None:
    """One path's answer (whatever its query), ahead of any ``answer`` for every path."""
    http.get(
        re.compile(rf"^{re.escape(BASE + path)}(\?.*)?$"), status=status, payload=payload,
        repeat=True, response_class=CompatResponse,
    )  # fmt: skip


def window(succeeded: int, failed: int, rate: float | None) -> dict[str, Any]:
    return {"succeeded": succeeded, "failed": failed, "attempt_success_rate": rate}


# ep_1's latest attempt failed; ep_2 is disabled (and counts in no health).
STATS = {
    "ep_1": {
        "last_hour": window(3, 1, 0.6), "last_day": window(9, 1, 0.8), "backlog": 2,
        "per_minute": [], "last_success_at": "2026-01-31T12:00:00.000Z",
        "last_failure": {"at": "2026-01-31T12:05:00.000Z", "status_code": 500, "error": None},
    },
    "ep_2": {
        "last_hour": window(0, 0, None), "last_day": window(1, 0, 1.0), "backlog": 0,
        "per_minute": [], "last_success_at": "2026-01-31T11:00:00.000Z", "last_failure": None,
    },
}  # fmt: skip
ENDPOINTS = [ENDPOINT, {**ENDPOINT, "id": "ep_2", "disabled": True}]
HEALTH_HEADER = [
    "ID", "UID", "NAME", "HEALTH", "ENDPOINTS", "DISABLED", "FAILING", "DELIVERED", "1H",
    "SUCCESS", "1H", "DELIVERED", "1D", "SUCCESS", "1D", "BACKLOG", "RATE", "LIMIT",
]  # fmt: skip


def app_with_endpoints(http: aioresponses, stats_status: int = 200) -> None:
    """APP with ENDPOINTS and their STATS (or, for every stats request, ``stats_status``)."""
    nested = f"/v1/applications/{APP['id']}/endpoints"
    route(http, nested, {"data": ENDPOINTS, "next_cursor": None})
    for endpoint_id, stats in STATS.items():
        problem = {"type": "about:blank", "status": stats_status, "title": "Forbidden"}
        answered = stats if stats_status == 200 else problem
        route(http, f"{nested}/{endpoint_id}/stats", answered, stats_status)


def test_list_shows_each_applications_health_and_volume_and_pages(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    app_with_endpoints(http)
    answer(http, "GET", {"data": [APP], "next_cursor": "c2"})
    assert run("applications", "list", "--uid", "acme", "--limit", "10") == 0
    made = requests(http)
    assert made[0] == ("GET", "/v1/applications?limit=10&uid=acme", None)
    assert sorted(path for _, path, _ in made[1:]) == [
        "/v1/applications/app_01JAPP/endpoints/ep_1/stats",
        "/v1/applications/app_01JAPP/endpoints/ep_2/stats",
        "/v1/applications/app_01JAPP/endpoints?limit=250",
    ]
    printed = capsys.readouterr()
    header, row = printed.out.splitlines()
    assert header.split() == HEALTH_HEADER
    assert row.split() == [
        "app_01JAPP", "acme", "Acme", "failing", "2", "1", "1", "4", "75.0%", "11", "90.9%",
        "2", "5/s",
    ]  # fmt: skip
    # Aligned: each column starts where its title does, numbers end where theirs ends.
    assert row[header.index("HEALTH") :].startswith("failing ")
    end = header.index("BACKLOG") + len("BACKLOG")
    assert row[:end].endswith(" 2")
    assert "--cursor c2" in printed.err

    assert run("applications", "list", "--json") == 0
    listed = orjson.loads(capsys.readouterr().out)
    assert listed["next_cursor"] == "c2"
    (only,) = listed["data"]
    assert only["id"] == APP["id"] and only["rate_limit"] == 5.0
    assert only["health"] == {
        "status": "failing", "endpoints": 2, "disabled": 1, "failing": 1,
        "last_hour": {"deliveries": 4, "succeeded": 3, "failed": 1, "success_rate": 0.75},
        "last_day": {"deliveries": 11, "succeeded": 10, "failed": 1, "success_rate": 10 / 11},
        "backlog": 2,
    }  # fmt: skip


def test_a_key_without_deliveries_read_lists_the_endpoint_counts_alone(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    app_with_endpoints(http, stats_status=403)
    answer(http, "GET", {"data": [APP], "next_cursor": None})
    assert run("applications", "list") == 0
    _, row = capsys.readouterr().out.splitlines()
    assert row.split()[3:] == ["-", "2", "1", "-", "-", "-", "-", "-", "-", "5/s"]
    assert run("applications", "list", "--json") == 0
    health = orjson.loads(capsys.readouterr().out)["data"][0]["health"]
    assert (health["status"], health["endpoints"], health["disabled"]) == (None, 2, 1)
    assert health["last_hour"] is health["backlog"] is None


def test_list_keeps_the_columns_aligned_and_control_characters_visible(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = {**APP, "id": "app_02", "name": "Evil\x1b]0;pwned\x07 日本", "uid": None}
    route(http, "/v1/applications/app_02/endpoints", {"data": [], "next_cursor": None})
    app_with_endpoints(http)
    answer(http, "GET", {"data": [hostile, APP], "next_cursor": None})
    assert run("applications", "list") == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    header, evil, acme = out.splitlines()
    assert "Evil\\x1b]0;pwned\\x07 日本" in evil
    at = width(header[: header.index("HEALTH")])
    # An application without endpoints is said to be so; wide characters count as two.
    assert width(evil[: evil.index("no endpoints")]) == at
    assert width(acme[: acme.index("failing")]) == at


def test_show_update_and_delete_name_the_application_as_one_segment(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    route(http, "/v1/applications/app_01JAPP/endpoints", {"data": [], "next_cursor": None})
    answer(http, "GET", APP)
    answer(http, "PATCH", APP)
    answer(http, "DELETE", {**JOB, "kind": "delete"}, 202)
    assert run("applications", "show", "acme/eu") == 0
    shown = capsys.readouterr().out
    assert "metadata      plan=pro" in shown and "health        no endpoints" in shown
    assert run("applications", "update", "..", "--name", "Acme 2", "--no-uid") == 0
    assert run("applications", "delete", "app_01JAPP", "--no-wait") == 0
    assert requests(http) == [
        ("GET", "/v1/applications/acme%2Feu", None),
        # Its figures on its id's routes: the uid is resolved once.
        ("GET", "/v1/applications/app_01JAPP/endpoints?limit=250", None),
        ("PATCH", "/v1/applications/%2E%2E", {"name": "Acme 2", "uid": None}),
        ("DELETE", "/v1/applications/app_01JAPP", None),
    ]
    assert "job      job_1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "body"),
    [
        (["--uid", "new"], {"uid": "new"}),
        (["--no-uid"], {"uid": None}),
        (["--metadata", "a=1", "--metadata", "b="], {"metadata": {"a": "1", "b": ""}}),
        (["--no-metadata"], {"metadata": None}),
        (["--rate-limit", "2.5"], {"rate_limit": 2.5}),
        (["--no-rate-limit", "--name", "N"], {"rate_limit": None, "name": "N"}),
    ],
)
def test_update_patches_only_what_is_given_and_null_clears(
    argv: list[str], body: dict[str, Any]
) -> None:
    assert changes(parse("applications", "update", "acme", *argv)) == body


def test_an_update_without_changes_or_with_contradictions_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run("applications", "update", "acme") == cli.EXIT_USAGE
    assert "--name, --uid" in capsys.readouterr().err
    for argv in (["--uid", "x", "--no-uid"], ["--metadata", "a=1", "--no-metadata"]):
        with pytest.raises(SystemExit) as exited:
            parse("applications", "update", "acme", *argv)
        assert exited.value.code == 2
    with pytest.raises(SystemExit):
        parse("applications", "create", "Acme", "--metadata", "plan")


NESTED = "/v1/applications/acme"


@pytest.mark.parametrize(
    ("command", "method", "path"),
    [
        ("endpoints list", "GET", "/v1/endpoints?limit=50"),
        ("endpoints list --app acme", "GET", f"{NESTED}/endpoints?limit=50"),
        ("endpoints show ep_1 --app acme", "GET", f"{NESTED}/endpoints/ep_1"),
        ("endpoints disable ep_1 --app ..", "POST",
         "/v1/applications/%2E%2E/endpoints/ep_1/disable"),
        ("endpoints show .. --app acme", "GET", f"{NESTED}/endpoints/%2E%2E"),
        ("endpoints recover ep_1 --since 1h --app acme --no-wait", "POST",
         f"{NESTED}/endpoints/ep_1/recover"),
        ("stats ep_1 --app acme", "GET", f"{NESTED}/endpoints/ep_1/stats"),
        ("events list", "GET", "/v1/events?limit=50"),
        ("events list --app app_1 --type a.b", "GET",
         "/v1/applications/app_1/events?type=a.b&limit=50"),
        ("events show msg_1 --app acme", "GET", f"{NESTED}/events/msg_1"),
        ("events replay msg_1 --app acme", "POST", f"{NESTED}/events/msg_1/replay"),
        ("deliveries list --status failed", "GET", "/v1/deliveries?status=failed&limit=50"),
        ("deliveries list --app acme", "GET", f"{NESTED}/deliveries?limit=50"),
        ("deliveries show dlv_1 --app acme", "GET", f"{NESTED}/deliveries/dlv_1"),
        ("deliveries retry dlv_1 --app acme", "POST", f"{NESTED}/deliveries/dlv_1/retry"),
        ("deliveries retry --status failed --app acme --no-wait", "POST",
         f"{NESTED}/deliveries/retry?status=failed"),
    ],
)  # fmt: skip
def test_app_puts_a_command_on_its_applications_routes(
    http: aioresponses, command: str, method: str, path: str
) -> None:
    # Not a real answer: only the request is looked at, and the command may fail on it.
    answer(http, method, {**JOB, "data": [], "next_cursor": None, "deliveries": []})
    cli.run(parse(*command.split(), "--json"))
    ((sent_method, sent_path, _),) = requests(http)
    assert (sent_method, sent_path) == (method, path)


def test_events_send_names_the_application_and_creates_it_only_when_asked(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    answer(http, "POST", {"id": "msg_1", "application": "app_01JAPP"}, 202)
    assert run("events", "send", "invoice.paid", '{"n": 1}') == 0
    assert run(
        "events", "send", "invoice.paid", "--app", "acme", "--channel", "eu", "--channel",
        "vip", "--create-as", "Acme Ltd",
    ) == 0  # fmt: skip
    (first, second) = requests(http)
    assert first == (
        "POST",
        "/v1/applications/default/events",
        {"type": "invoice.paid", "data": {"n": 1}},
    )
    assert second == (
        "POST",
        "/v1/applications/acme/events",
        {"type": "invoice.paid", "data": {}, "channels": ["eu", "vip"],
         "application": {"name": "Acme Ltd"}},
    )  # fmt: skip
    assert capsys.readouterr().out.splitlines() == ["msg_1", "msg_1"]


def test_create_as_needs_the_application_it_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("events", "send", "invoice.paid", "--create-as", "Acme") == cli.EXIT_USAGE
    assert "--app" in capsys.readouterr().err


def test_endpoints_are_created_with_channels_and_tables_show_the_application(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    answer(http, "POST", ENDPOINT, 201)
    answer(http, "GET", {"data": [ENDPOINT], "next_cursor": None})
    assert (
        run("endpoints", "create", "https://example.com/h", "--channel", "eu", "--app", "acme") == 0
    )
    shown = capsys.readouterr().out
    assert "application  app_01JAPP" in shown and "channels     eu" in shown
    assert run("endpoints", "list", "--app", "acme") == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["ID", "APPLICATION", "URL"]
    assert row.split()[:2] == ["ep_1", "app_01JAPP"]
    (created, _) = requests(http)
    assert created[1] == "/v1/applications/acme/endpoints"
    assert created[2]["channels"] == ["eu"]


def test_every_app_option_says_what_the_command_acts_on_without_it() -> None:
    helps = {
        ("endpoints", "list"): "default: the default application",
        ("events", "send"): "uid default",
        ("events", "list"): "every application the key may see",
        ("deliveries", "list"): "every application the key may see",
        ("deliveries", "show"): "whichever it belongs to",
    }
    for (group, action), text in helps.items():
        sub = _subparser(parser(), group, action)
        (option,) = [a for a in sub._actions if "--app" in a.option_strings]
        assert option.help is not None and text in option.help, (group, action)


def _subparser(root: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    found = root
    for name in names:
        (choices,) = [a for a in found._actions if isinstance(a, argparse._SubParsersAction)]
        found = choices.choices[name]
    return found
