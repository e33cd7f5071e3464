"""``webhook-service listen``: a receiver on loopback for the running service's deliveries,
in the spirit of ``stripe listen``.

It binds 127.0.0.1 first (port 0: a free one), then makes an endpoint for that URL through
the API with the key given, so the endpoint never points at nothing; it deletes the endpoint
when it stops (Ctrl-C, SIGTERM, or a failure after the endpoint was made). Every request is
verified with ``signer`` against the secret the create answered, printed, and answered: 204
when verified, 401 when not; with ``--forward-to`` a verified request is passed on to the
user's own app (same body, same ``webhook-*`` headers) and its answer is printed and
returned to the service, so the service records what the app said.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import socket
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from yarl import URL

from signer import Verifier, WebhookVerificationError
from webhook_service.admin.arguments import add_app_option
from webhook_service.admin.command import Context, Subcommands, add_action
from webhook_service.admin.output import Output
from webhook_service.client.errors import APIError, TransportError
from webhook_service.controls import json_safe, visible

HOST = "127.0.0.1"
PATH = "/webhooks"
VERIFIED = 204
NOT_VERIFIED = 401
# No endpoint yet to verify against: only a stray request can come this early.
NOT_READY = 503
FORWARD_FAILED = 502
FORWARD_TIMED_OUT = 504
# Below the service's default request timeout (WEBHOOK_REQUEST_TIMEOUT, 15 s), so a slow app
# is recorded as our 504 with a reason rather than as the service's own timeout.
FORWARD_TIMEOUT = 10.0
# A request that comes between the endpoint's creation and the answer reaching us waits
# this long for the secret.
ARM_TIMEOUT = 5.0
# The app's answer is printed up to this much; the whole of it goes back to the service.
ANSWER_SHOWN = 4096
# How many webhook-ids' attempt counts are kept: enough for any session a person watches.
SEEN_KEPT = 10_000
# What is passed on to the app besides the body: the signature's inputs and the body's type.
FORWARDED_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature", "content-type")
# An answer that must not carry a body (RFC 9110): aiohttp refuses to send one.
_BODILESS = frozenset({204, 304})

LOOPBACK_HINT = (
    "the service refuses loopback URLs unless allowed: start it with "
    "WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8 (WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8 make run)"
)
HTTPS_HINT = "the service takes https URLs only (WEBHOOK_HTTPS_ONLY); listen serves plain http"


def event_types(text: str) -> list[str]:
    """--types: event types separated by commas."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one event type, e.g. invoice.paid")
    return names


def forward_url(text: str) -> str:
    """--forward-to: an http(s) URL with a host; any host, since this is the user's own app."""
    try:
        url = URL(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL with a host")
    return text


def port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port


def problem(verifier: Verifier, body: bytes, headers: Mapping[str, str]) -> str | None:
    """Why the request is not authentic, or None when it is."""
    try:
        verifier.verify(body, headers)
    except WebhookVerificationError as exc:
        return str(exc)
    return None


def event_type(body: bytes) -> str | None:
    """The envelope's ``type``, if the body is one."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    kind = parsed.get("type") if isinstance(parsed, dict) else None
    return kind if isinstance(kind, str) else None


def pretty(body: bytes) -> str:
    """JSON indented; anything else as text (invalid UTF-8 replaced)."""
    try:
        return orjson.dumps(orjson.loads(body), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")


def _as_json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")


class Attempts:
    """How many times each webhook-id came here: its attempt number, as far as this listener
    knows (the service sends the same webhook-id on every retry; a replay counts on)."""

    def __init__(self, kept: int = SEEN_KEPT) -> None:
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._kept = kept

    def count(self, webhook_id: str) -> int:
        n = self._seen.pop(webhook_id, 0) + 1
        self._seen[webhook_id] = n
        if len(self._seen) > self._kept:
            self._seen.popitem(last=False)
        return n


@dataclass(frozen=True)
class Forwarded:
    """What the user's app answered, or why it could not."""

    url: str
    status: int
    body: bytes = b""
    content_type: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Arrival:
    """One request that came to the listener, and what it was answered."""

    at: datetime
    webhook_id: str | None
    event_type: str | None
    attempt: int | None
    problem: str | None  # None: verified
    status: int
    body: bytes
    forwarded: Forwarded | None = None

    @property
    def verified(self) -> bool:
        return self.problem is None


def render(arrival: Arrival) -> str:
    """The lines a person reads for one request: what, which attempt, verified or why not,
    what it was answered; the body pretty-printed; the app's answer when forwarded."""
    verdict = "verified" if arrival.verified else f"not verified: {arrival.problem}"
    attempt = "" if arrival.attempt is None else f"  attempt {arrival.attempt}"
    head = (
        f"{arrival.at:%H:%M:%S}  {arrival.event_type or '-'}  {arrival.webhook_id or '-'}"
        f"{attempt}  {verdict}  → {arrival.status}"
    )
    lines = [head, pretty(arrival.body)]
    sent = arrival.forwarded
    if sent is not None:
        if sent.error is not None:
            lines.append(f"forward to {sent.url} failed: {sent.error}")
        else:
            shown = sent.body[:ANSWER_SHOWN]
            more = len(sent.body) - len(shown)
            answer = pretty(shown) + (f"\n… ({more} bytes more)" if more else "")
            lines.append(f"{sent.url} answered {sent.status}:" + (f"\n{answer}" if shown else ""))
    return "\n".join(lines)


def as_json(arrival: Arrival) -> dict[str, Any]:
    """One request as a JSON object (--json prints one per line)."""
    sent = arrival.forwarded
    return {
        "at": arrival.at.isoformat(),
        "webhook_id": arrival.webhook_id,
        "type": arrival.event_type,
        "attempt": arrival.attempt,
        "verified": arrival.verified,
        "problem": arrival.problem,
        "status": arrival.status,
        "body": _as_json(arrival.body),
        "forwarded": None
        if sent is None
        else {"url": sent.url, "status": sent.status, "body": _as_json(sent.body),
              "error": sent.error},
    }  # fmt: skip


@dataclass
class Printer:
    """Writes each line or arrival to standard output at once (people watch it live)."""

    out: Output

    def line(self, data: dict[str, Any], text: str) -> None:
        if self.out.json:
            self.out.out.write(json_safe(orjson.dumps(data).decode()) + "\n")
        else:
            self.out.out.write(visible(text) + "\n")
        self.out.out.flush()

    def arrival(self, arrival: Arrival) -> None:
        self.line(as_json(arrival), render(arrival) + "\n")


class Listener:
    """The receiver's one handler. Armed with the endpoint's secret once it exists."""

    def __init__(
        self,
        show: Callable[[Arrival], None],
        session: aiohttp.ClientSession | None = None,
        forward_to: str | None = None,
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        self._show = show
        self._session = session
        self._forward_to = forward_to
        self._clock = clock
        self._verifier: Verifier | None = None
        self._armed = asyncio.Event()
        self._attempts = Attempts()

    def arm(self, keys: list[str]) -> None:
        self._verifier = Verifier(keys)
        self._armed.set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        try:
            await asyncio.wait_for(self._armed.wait(), ARM_TIMEOUT)
        except TimeoutError:
            return web.Response(status=NOT_READY, text="listen: no endpoint yet\n")
        assert self._verifier is not None  # armed
        webhook_id = request.headers.get("webhook-id")
        arrival = Arrival(
            at=self._clock(),
            webhook_id=webhook_id,
            event_type=event_type(body),
            # Only a verified request is an attempt of ours; anyone on loopback can post.
            attempt=None,
            problem=problem(self._verifier, body, request.headers),
            status=NOT_VERIFIED,
            body=body,
        )
        if not arrival.verified:
            self._show(arrival)
            return web.Response(status=NOT_VERIFIED, text=f"not verified: {arrival.problem}\n")
        assert webhook_id is not None  # verified
        arrival = dataclasses.replace(
            arrival, attempt=self._attempts.count(webhook_id), status=VERIFIED
        )
        if self._forward_to is None:
            self._show(arrival)
            return web.Response(status=VERIFIED)
        sent = await self._forward(body, request.headers)
        self._show(dataclasses.replace(arrival, status=sent.status, forwarded=sent))
        if sent.error is not None:
            return web.Response(status=sent.status, text=f"listen: {sent.error}\n")
        return web.Response(
            status=sent.status,
            body=None if sent.status in _BODILESS else sent.body,
            content_type=sent.content_type,
        )

    async def _forward(self, body: bytes, headers: Mapping[str, str]) -> Forwarded:
        assert self._session is not None and self._forward_to is not None
        url = self._forward_to
        passed = {name: headers[name] for name in FORWARDED_HEADERS if name in headers}
        try:
            async with self._session.post(
                url,
                data=body,
                headers=passed,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT),
            ) as answer:
                content = await answer.read()
                kind = answer.headers.get("Content-Type")
                # aiohttp takes the type alone; its charset parameter, if any, goes with it.
                return Forwarded(url, answer.status, content, kind.split(";")[0] if kind else None)
        except TimeoutError:
            return Forwarded(url, FORWARD_TIMED_OUT, error=f"no answer in {FORWARD_TIMEOUT:g} s")
        except aiohttp.ClientError as exc:
            return Forwarded(url, FORWARD_FAILED, error=str(exc) or type(exc).__name__)


async def serve(listener: Listener, port: int) -> tuple[web.AppRunner, int]:
    """The receiver on 127.0.0.1:``port`` (0: a free one); the runner and the port bound."""
    app = web.Application()
    # Any path: a request sent somewhere else is shown (and refused) rather than a bare 404.
    app.router.add_route("POST", "/{tail:.*}", listener.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, HOST, port)
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    bound: int = runner.addresses[0][1]
    return runner, bound


def _hinted(error: APIError) -> APIError:
    """A refused create with a hint of what to change on the service, when we know one."""
    reasons = " ".join(str(e.get("detail", "")) for e in error.problem.errors)
    if error.problem.kind != "destination-blocked":
        return error
    hint = HTTPS_HINT if "https_required" in reasons else LOOPBACK_HINT
    detail = f"{error.problem.detail}\nhint: {hint}"
    return APIError(dataclasses.replace(error.problem, detail=detail))


def _banner(url: str, created: dict[str, Any], types: list[str] | None, secret: str) -> str:
    what = ", ".join(types) if types else "every event type"
    return (
        f"Ready: {url} receives {what} as endpoint {created['id']} "
        f"(deleted when this stops)\nSigning secret: {secret}\nCtrl-C stops.\n"
    )


async def listen(ctx: Context) -> None:
    args = ctx.args
    printer = Printer(ctx.out)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Before anything is made, so a Ctrl-C during the create still deletes what it made.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with aiohttp.ClientSession() as session:
            listener = Listener(printer.arrival, session, args.forward_to)
            try:
                runner, port = await serve(listener, args.port)
            except OSError as exc:
                raise TransportError(
                    f"cannot listen on {HOST}:{args.port}: {exc.strerror}"
                ) from None
            try:
                await _receive(ctx, printer, listener, f"http://{HOST}:{port}{PATH}", stop)
            finally:
                await runner.cleanup()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _receive(
    ctx: Context, printer: Printer, listener: Listener, url: str, stop: asyncio.Event
) -> None:
    """Make the endpoint, take deliveries until told to stop, then delete it."""
    args = ctx.args
    fields: dict[str, Any] = {
        "url": url,
        "description": f"webhook-service listen on {socket.gethostname()}, pid {os.getpid()}",
    }
    if args.types:
        fields["event_types"] = args.types
    try:
        created = await ctx.api.create_endpoint(fields)
    except APIError as exc:
        raise _hinted(exc) from None
    try:
        secret = created.get("secret") or created["public_key"]
        listener.arm([secret])
        banner = _banner(url, created, args.types, secret)
        printer.line({"listening": url, "endpoint_id": created["id"], "secret": secret}, banner)
        await stop.wait()
    except BaseException:
        # Whatever stops us, the endpoint goes; a failure to delete it is said, not raised
        # over what is on its way out.
        if (left := await _delete(ctx, created["id"])) is not None:
            ctx.out.error(f"error: {left}")
        raise
    if (left := await _delete(ctx, created["id"])) is not None:
        raise TransportError(left)
    ctx.out.note(f"stopped; endpoint {created['id']} deleted")


async def _delete(ctx: Context, endpoint_id: str) -> str | None:
    """Delete the endpoint (the receiver still answers what is in flight); why not, if not."""
    try:
        await ctx.api.delete_endpoint(endpoint_id)
    except (APIError, TransportError) as exc:
        return (
            f"could not delete endpoint {endpoint_id} ({exc}): DELETE /v1/endpoints/{endpoint_id}"
        )
    return None


def register(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = add_action(
        commands, common, "listen",
        listen,
        "receive this service's deliveries on 127.0.0.1: verify, print and answer each one "
        "(or forward it to your app) through an endpoint that lasts while this runs",
    )  # fmt: skip
    parser.add_argument(
        "--types", type=event_types, metavar="T,...",
        help="event types to subscribe to, separated by commas (default: every type)",
    )  # fmt: skip
    parser.add_argument(
        "--port", type=port_number, default=0, metavar="P",
        help="the port on 127.0.0.1 (default 0: a free one, printed)",
    )  # fmt: skip
    parser.add_argument(
        "--forward-to", type=forward_url, metavar="URL",
        help="pass each verified delivery on to your app here and answer what it answers",
    )  # fmt: skip
    add_app_option(parser)
