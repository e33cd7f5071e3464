"""``webhook-service listen``'s pieces: its arguments, the verdict on a request, what it
prints, how it answers (and forwards), and the endpoint it makes and always deletes; the
receiver on a real loopback socket, the API a fake that records the calls."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import signal
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, cast

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from signer import Signer, Verifier, generate_secret
from tests.unit.admin.test_admin_applications import parse
from webhook_service.admin import listen as listen_module
from webhook_service.admin.api import AdminApi
from webhook_service.admin.command import Context
from webhook_service.admin.listen import (
    Arrival,
    Attempts,
    Forwarded,
    Listener,
    Printer,
    as_json,
    event_types,
    forward_url,
    problem,
    render,
    serve,
)
from webhook_service.admin.output import Output
from webhook_service.client.errors import APIError, ProblemDetails, TransportError

SECRET = generate_secret()
BODY = b'{"type": "invoice.paid", "timestamp": "2026-12-02T04:00:00.000Z", "data": {"n": 1}}'
AT = datetime(2026, 12, 2, 4, 31, 7)


def signed(body: bytes = BODY, msg_id: str = "msg_1", secret: str = SECRET) -> dict[str, str]:
    return {
        **Signer([secret]).headers(msg_id, int(time.time()), body),
        "Content-Type": "application/json",
    }


# Arguments


def test_types_are_split_on_commas_and_send_is_events_send() -> None:
    args = parse("listen", "--types", "invoice.paid, invoice.due,", "--port", "9000")
    assert (args.types, args.port, args.forward_to, args.app) == (
        ["invoice.paid", "invoice.due"], 9000, None, None,
    )  # fmt: skip
    assert parse("listen").types is None and parse("listen").port == 0
    short, long = (
        parse("send", "invoice.paid", '{"n": 1}'),
        parse("events", "send", "invoice.paid", '{"n": 1}'),
    )
    assert short.admin is long.admin  # the same handler, not a copy
    same = {k: v for k, v in vars(long).items() if k not in ("command", "action")}
    assert {k: v for k, v in vars(short).items() if k != "command"} == same


@pytest.mark.parametrize(
    ("check", "text"),
    [(event_types, ","), (forward_url, "ftp://x/y"), (forward_url, "localhost:3000")],
)
def test_bad_arguments_are_refused(check: Any, text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        check(text)


def test_a_port_out_of_range_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as refused:
        parse("listen", "--port", "70000")
    assert refused.value.code == 2


# The verdict


def test_a_signed_request_is_verified_and_each_fault_says_why() -> None:
    verifier = Verifier([SECRET])
    assert problem(verifier, BODY, signed()) is None
    assert "no signature matched" in str(problem(verifier, BODY + b" ", signed()))
    other = signed(secret=generate_secret())
    assert "no signature matched" in str(problem(verifier, BODY, other))
    unsigned = {k: v for k, v in signed().items() if k != "webhook-signature"}
    assert problem(verifier, BODY, unsigned) == "missing or empty header: webhook-signature"
    old = {**signed(), "webhook-timestamp": str(int(time.time()) - 3600)}
    assert "in the past" in str(problem(verifier, BODY, old))


def test_attempts_count_each_webhook_id_and_forget_the_oldest() -> None:
    seen = Attempts(kept=2)
    assert [seen.count(i) for i in ("a", "a", "b", "a", "c", "b")] == [1, 2, 1, 3, 1, 1]
    # "b" was the oldest when "c" came and was forgotten, then "a" when "b" came back.
    assert seen.count("c") == 2 and seen.count("a") == 1


# What is printed


def test_a_verified_arrival_prints_its_line_and_the_body_indented() -> None:
    arrival = Arrival(AT, "msg_1", "invoice.paid", 2, None, 204, BODY)
    head, *body = render(arrival).splitlines()
    assert head == "04:31:07  invoice.paid  msg_1  attempt 2  verified  → 204"
    assert body[:2] == ["{", '  "type": "invoice.paid",'] and '    "n": 1' in body


def test_a_refused_arrival_says_why_and_a_body_not_json_prints_as_text() -> None:
    arrival = Arrival(AT, None, None, None, "missing or empty header: webhook-id", 401, b"hi\xff")
    assert render(arrival).splitlines() == [
        "04:31:07  -  -  not verified: missing or empty header: webhook-id  → 401",
        "hi\ufffd",
    ]


def test_a_forwarded_arrival_shows_the_apps_answer_cut_or_why_it_failed() -> None:
    app = "http://127.0.0.1:3000/hook"
    big = Forwarded(app, 201, b"x" * 5000, "text/plain")
    text = render(Arrival(AT, "msg_1", "t", 1, None, 201, b"{}", big))
    assert text.splitlines()[0].endswith("verified  → 201")
    assert f"{app} answered 201:\n{'x' * 4096}\n… (904 bytes more)" in text
    failed = Forwarded(app, 502, error="Cannot connect")
    assert render(Arrival(AT, "msg_1", "t", 1, None, 502, b"{}", failed)).endswith(
        f"forward to {app} failed: Cannot connect"
    )


def test_control_characters_from_outsiders_print_escaped_in_text_and_json() -> None:
    hostile = b'{"type": "\x1b[2K\\r200 OK"}'
    arrival = Arrival(AT, "msg_\x1b]0;x\x07", None, None, "no signature matched", 401, hostile)
    for json in (False, True):
        out = io.StringIO()
        Printer(Output(json, out=out)).arrival(arrival)
        assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    line = orjson.loads(out.getvalue())
    assert line["webhook_id"] == "msg_\x1b]0;x\x07" and line["verified"] is False


def test_json_gives_the_body_parsed_and_the_apps_answer() -> None:
    sent = Forwarded("http://app", 200, b'{"ok": true}', "application/json")
    line = as_json(Arrival(AT, "msg_1", "invoice.paid", 1, None, 200, BODY, sent))
    assert line["body"]["data"] == {"n": 1} and line["forwarded"]["body"] == {"ok": True}
    assert (line["verified"], line["problem"], line["status"]) == (True, None, 200)


# The receiver, on a real socket


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as made:
        yield made


async def _receiver(listener: Listener) -> tuple[web.AppRunner, str]:
    runner, port = await serve(listener, 0)
    return runner, f"http://127.0.0.1:{port}/webhooks"


async def test_verified_is_204_refused_is_401_and_retries_count(
    session: aiohttp.ClientSession,
) -> None:
    shown: list[Arrival] = []
    listener = Listener(shown.append)
    listener.arm([SECRET])
    runner, url = await _receiver(listener)
    try:
        for _ in range(2):
            async with session.post(url, data=BODY, headers=signed()) as answer:
                assert answer.status == 204
        tampered = BODY.replace(b'"n": 1', b'"n": 2')
        async with session.post(url, data=tampered, headers=signed()) as answer:
            assert answer.status == 401 and "not verified" in await answer.text()
        async with session.post(url.replace("/webhooks", "/elsewhere"), data=b"x") as answer:
            assert answer.status == 401
    finally:
        await runner.cleanup()
    assert [(a.attempt, a.verified, a.status) for a in shown] == [
        (1, True, 204), (2, True, 204), (None, False, 401), (None, False, 401),
    ]  # fmt: skip
    assert shown[0].event_type == "invoice.paid" and shown[0].webhook_id == "msg_1"


async def test_a_request_before_the_secret_waits_for_it(
    session: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[Arrival] = []
    listener = Listener(shown.append)
    runner, url = await _receiver(listener)
    try:
        early = asyncio.ensure_future(session.post(url, data=BODY, headers=signed()))
        await asyncio.sleep(0.2)
        listener.arm([SECRET])
        async with await early as answer:
            assert answer.status == 204
        # Never armed: a stray request is refused once the wait is over.
        monkeypatch.setattr(listen_module, "ARM_TIMEOUT", 0.1)
        stray, stray_url = await _receiver(Listener(shown.append))
        async with session.post(stray_url, data=BODY, headers=signed()) as answer:
            assert answer.status == 503
        await stray.cleanup()
    finally:
        await runner.cleanup()


async def _app(status: int, body: bytes, seen: list[web.Request]) -> TestServer:
    async def hook(request: web.Request) -> web.Response:
        seen.append(request)
        await request.read()
        return web.Response(status=status, body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/hook", hook)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


async def test_forward_passes_body_and_webhook_headers_and_answers_what_the_app_did(
    session: aiohttp.ClientSession,
) -> None:
    seen: list[web.Request] = []
    app = await _app(202, b'{"queued": true}', seen)
    shown: list[Arrival] = []
    listener = Listener(shown.append, session, str(app.make_url("/hook")))
    listener.arm([SECRET])
    runner, url = await _receiver(listener)
    headers = signed()
    try:
        async with session.post(url, data=BODY, headers=headers) as answer:
            assert answer.status == 202 and await answer.read() == b'{"queued": true}'
            assert answer.content_type == "application/json"
        # Not verified: refused here, never passed on.
        async with session.post(url, data=BODY + b" ", headers=headers) as answer:
            assert answer.status == 401
    finally:
        await runner.cleanup()
        await app.close()
    (request,) = seen
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        assert request.headers[name] == headers[name]
    assert shown[0].forwarded is not None and shown[0].forwarded.status == 202
    assert shown[0].status == 202 and shown[1].forwarded is None


async def test_an_app_that_cannot_be_reached_is_a_502_with_the_reason(
    session: aiohttp.ClientSession,
) -> None:
    shown: list[Arrival] = []
    # A port nobody listens on: bound, then closed.
    closed, port = await serve(Listener(shown.append), 0)
    await closed.cleanup()
    listener = Listener(shown.append, session, f"http://127.0.0.1:{port}/hook")
    listener.arm([SECRET])
    runner, url = await _receiver(listener)
    try:
        async with session.post(url, data=BODY, headers=signed()) as answer:
            assert answer.status == 502 and "listen:" in await answer.text()
    finally:
        await runner.cleanup()
    assert shown[0].forwarded is not None and shown[0].forwarded.error


# The endpoint it makes, and always deletes


class FakeApi:
    """Records the endpoint calls; ``refuse`` makes the create fail with that problem."""

    def __init__(self, refuse: ProblemDetails | None = None, delete_fails: bool = False) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.refuse = refuse
        self.delete_fails = delete_fails

    async def create_endpoint(self, fields: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", fields))
        if self.refuse is not None:
            raise APIError(self.refuse)
        return {"id": "ep_1", "secret": SECRET, "public_key": None}

    async def delete_endpoint(self, endpoint_id: str) -> None:
        self.calls.append(("delete", endpoint_id))
        if self.delete_fails:
            raise TransportError("cannot reach the API")


def _context(api: FakeApi, *argv: str) -> tuple[Context, io.StringIO]:
    out = io.StringIO()
    args = parse("listen", *argv)
    # A fake of AdminApi's two endpoint methods, all listen calls.
    return Context(cast(AdminApi, api), args, Output(False, out=out, err=io.StringIO()), "k"), out


async def _stop_when_ready(out: io.StringIO) -> str:
    """Wait for the banner, post one signed delivery to the URL it names, then Ctrl-C."""
    while "Ready:" not in out.getvalue():
        await asyncio.sleep(0.01)
    url = out.getvalue().split("Ready: ", 1)[1].split()[0]
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=BODY, headers=signed()) as answer,
    ):
        assert answer.status == 204
    os.kill(os.getpid(), signal.SIGINT)
    return url


async def test_the_endpoint_is_made_for_the_bound_url_and_deleted_on_ctrl_c() -> None:
    api = FakeApi()
    ctx, out = _context(api, "--types", "invoice.paid")
    listening, url = await asyncio.gather(listen_module.listen(ctx), _stop_when_ready(out))
    assert listening is None
    (create, fields), delete = api.calls
    assert create == "create" and fields["url"] == url and url.startswith("http://127.0.0.1:")
    assert fields["event_types"] == ["invoice.paid"] and "listen" in fields["description"]
    assert delete == ("delete", "ep_1")
    assert f"Signing secret: {SECRET}" in out.getvalue()
    assert "invoice.paid  msg_1  attempt 1  verified  → 204" in out.getvalue()


async def test_a_failed_delete_fails_the_command_and_names_the_endpoint() -> None:
    ctx, out = _context(FakeApi(delete_fails=True))
    with pytest.raises(TransportError, match=r"could not delete endpoint ep_1 .*DELETE"):
        await asyncio.gather(listen_module.listen(ctx), _stop_when_ready(out))


@pytest.mark.parametrize(
    ("reason", "hint"),
    [
        ("blocked_address", "WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8"),
        ("https_required", "WEBHOOK_HTTPS_ONLY"),
    ],
)
async def test_a_blocked_create_hints_at_the_setting_and_leaves_nothing(
    reason: str, hint: str
) -> None:
    refused = ProblemDetails(
        422, type="https://webhooks.example/problems/destination-blocked",
        detail="This URL cannot receive webhooks: loopback",
        errors=({"pointer": "/url", "detail": f"{reason}: 127.0.0.1 is loopback"},),
    )  # fmt: skip
    api = FakeApi(refuse=refused)
    ctx, _ = _context(api)
    with pytest.raises(APIError) as raised:
        await listen_module.listen(ctx)
    assert hint in raised.value.problem.detail
    assert [call for call, _ in api.calls] == ["create"]
