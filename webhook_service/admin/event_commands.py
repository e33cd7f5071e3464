"""``webhook-service events …``: send one, list them, show one, replay one."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from webhook_service.admin import views
from webhook_service.admin.arguments import (
    IN_ANY,
    IN_EVERY,
    add_app_option,
    add_paging,
    instant,
    span_seconds,
)
from webhook_service.admin.command import Context, Handler, Subcommands, UsageError, add_action
from webhook_service.client.aio import AsyncWebhookClient
from webhook_service.client.attempts import Schedule


def payload(text: str) -> dict[str, Any]:
    """The event's data: JSON text, ``-`` for standard input, or ``@file``."""
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {exc.strerror}") from None
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"the data is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise argparse.ArgumentTypeError("the data must be a JSON object")
    return data


def deliver_at(text: str) -> datetime:
    """--deliver-at: an ISO 8601 time with its offset (a naive one is refused, as the API
    refuses it: whose local time it is would be a guess)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no offset: add Z or +hh:mm")
    return moment


def delay(text: str) -> int:
    """--delay: whole seconds, or a span ahead (``90s``, ``15m``, ``2h``, ``7d``)."""
    if text.isascii() and text.isdigit():
        return int(text)
    seconds = span_seconds(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"{text!r} is neither seconds nor a span like 15m, 2h")
    return seconds


# The producer client always names the application; this is the default one's uid.
DEFAULT_APP = "default"


async def send_event(ctx: Context) -> None:
    args = ctx.args
    if args.create_as is not None and args.app is None:
        raise UsageError("--create-as names the application --app (a uid) is to be created as")
    # The producer client: it retries on its own, under one idempotency key.
    async with AsyncWebhookClient(ctx.api.base_url, ctx.key) as client:
        event_id = await client.send(
            args.app or DEFAULT_APP,
            args.type,
            args.data,
            args.idempotency_key,
            channels=args.channels,
            create_as=args.create_as,
            schedule=Schedule(args.deliver_at, args.delay),
        )
    ctx.out.show({"id": event_id}, lambda: event_id)


async def list_events(ctx: Context) -> None:
    args = ctx.args
    query = {"type": args.type, "key_id": args.key_id, "since": args.since, "until": args.until,
             "limit": args.limit, "cursor": args.cursor}  # fmt: skip
    page = await ctx.api.events(query)
    ctx.out.show(page, lambda: views.events_table(page["data"]))
    ctx.out.next_page(page["next_cursor"])


async def show_event(ctx: Context) -> None:
    event = await ctx.api.event(ctx.args.event_id)

    def text() -> str:
        data = orjson.dumps(event["data"], option=orjson.OPT_INDENT_2).decode()
        deliveries = views.deliveries_table(event["deliveries"])
        return f"{views.event_fields(event)}\n\n{deliveries}\n\ndata:\n{data}"

    ctx.out.show(event, text)


async def replay_event(ctx: Context) -> None:
    replayed = await ctx.api.replay(ctx.args.event_id, ctx.args.endpoint_id)
    ctx.out.show(replayed, lambda: views.deliveries_table(replayed["deliveries"]))


SEND_TEXT = "send an event; prints its id once stored"
SEND_WITHOUT = "default: the default application, uid default; a key bound to another needs --app"


def add_send_arguments(send: argparse.ArgumentParser) -> None:
    """What ``events send`` takes; ``webhook-service send`` is the same command, shorter."""
    send.add_argument("type", metavar="TYPE", help="e.g. invoice.paid")
    send.add_argument(
        "data", type=payload, nargs="?", default={}, metavar="DATA",
        help="a JSON object, - for standard input, @FILE for a file (default {})",
    )  # fmt: skip
    send.add_argument("--idempotency-key", help="makes repeating this command safe")
    send.add_argument(
        "--channel", dest="channels", action="append", metavar="CHANNEL",
        help="repeat; only endpoints listing one of them, or none, receive it",
    )  # fmt: skip
    send.add_argument(
        "--create-as", metavar="NAME",
        help="create the application --app (a uid) with this name if it does not exist",
    )  # fmt: skip
    when = send.add_mutually_exclusive_group()
    when.add_argument(
        "--deliver-at", type=deliver_at, metavar="TIME",
        help="deliver then, not before: ISO 8601 with its offset, at most 30 days ahead",
    )  # fmt: skip
    when.add_argument(
        "--delay", type=delay, metavar="SECONDS",
        help="deliver this long after it is stored: seconds, or 90s, 15m, 2h, 7d",
    )  # fmt: skip


def register_send(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    """``webhook-service send TYPE DATA``: ``events send`` at the top level, as the README's
    first steps type it."""
    send = add_action(commands, common, "send", send_event, SEND_TEXT + " (as events send)")
    add_app_option(send, SEND_WITHOUT)
    add_send_arguments(send)


def register(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    group = commands.add_parser("events", help="send, list, show and replay events")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, handler: Handler, text: str, without: str) -> argparse.ArgumentParser:
        parser = add_action(actions, common, name, handler, text)
        add_app_option(parser, without)
        return parser

    send = action("send", send_event, SEND_TEXT, SEND_WITHOUT)
    add_send_arguments(send)

    listing = action("list", list_events, "list events, newest first, without payloads", IN_EVERY)
    listing.add_argument("--type", help="exactly this event type")
    listing.add_argument("--key-id", help="sent with this API key (its id)")
    listing.add_argument("--since", type=instant, help="ISO 8601, or a span back: 15m, 2h, 7d")
    listing.add_argument("--until", type=instant, help="ISO 8601, or a span back: 15m, 2h, 7d")
    add_paging(listing)

    action("show", show_event, "an event, its data and its deliveries", IN_ANY).add_argument(
        "event_id", metavar="EVENT_ID"
    )
    replay = action("replay", replay_event, "send a stored event again", IN_ANY)
    replay.add_argument("event_id", metavar="EVENT_ID")
    replay.add_argument(
        "--endpoint", dest="endpoint_id", metavar="ENDPOINT_ID",
        help="only to this endpoint (default: every endpoint subscribed now)",
    )  # fmt: skip
