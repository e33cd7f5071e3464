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


def test_list_filters_by_uid_and_pages(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    answer(http, "GET", {"data": [APP], "next_cursor": "c2"})
    assert run("applications", "list", "--uid", "acme", "--limit", "10") == 0
    assert requests(http) == [("GET", "/v1/applications?limit=10&uid=acme", None)]
    printed = capsys.readouterr()
    header, row = printed.out.splitlines()
    assert header.split() == ["ID", "UID", "NAME", "RATE", "LIMIT", "CREATED"]
    assert row.split()[:4] == ["app_01JAPP", "acme", "Acme", "5/s"]
    assert "--cursor c2" in printed.err


def test_show_update_and_delete_name_the_application_as_one_segment(
    http: aioresponses, capsys: pytest.CaptureFixture[str]
) -> None:
    answer(http, "GET", APP)
    answer(http, "PATCH", APP)
    answer(http, "DELETE", {**JOB, "kind": "delete"}, 202)
    assert run("applications", "show", "acme/eu") == 0
    assert "metadata    plan=pro" in capsys.readouterr().out
    assert run("applications", "update", "..", "--name", "Acme 2", "--no-uid") == 0
    assert run("applications", "delete", "app_01JAPP", "--no-wait") == 0
    assert requests(http) == [
        ("GET", "/v1/applications/acme%2Feu", None),
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
