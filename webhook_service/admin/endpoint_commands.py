"""``webhook-service endpoints …``: list, create, show, update, test-filter, enable,
disable, rotate, recover."""

from __future__ import annotations

import argparse
import json
from typing import Any

from webhook_service.admin import views
from webhook_service.admin.arguments import add_app_option, add_paging, instant
from webhook_service.admin.command import (
    Context,
    Handler,
    Subcommands,
    UsageError,
    add_action,
    add_wait_option,
    follow_job,
)

SCHEDULE_HELP = (
    "seconds before each attempt, the first 0; its length is the attempt budget (at most 20, "
    "7 days in all); default: WEBHOOK_RETRY_SCHEDULE"
)
ORDERING_HELP = "fifo: one delivery at a time, in the order accepted; none: several at once"
TIMEOUT_HELP = "its request timeout, 1 to 60 s; default: WEBHOOK_REQUEST_TIMEOUT"
FILTER_HELP = (
    'a payload filter, JSON: {"data.amount": {"$gte": 100}} (README: Payload filters); '
    "default: none"
)


async def list_endpoints(ctx: Context) -> None:
    if ctx.args.all:
        page: dict[str, Any] = {"data": await ctx.api.all_endpoints(), "next_cursor": None}
    else:
        page = await ctx.api.endpoints(ctx.args.limit, ctx.args.cursor)
    ctx.out.show(page, lambda: views.endpoints_table(page["data"]))
    ctx.out.next_page(page["next_cursor"])


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def _schedule(text: str) -> list[float]:
    """``0,1,1``: the delays before each attempt, in seconds (WEBHOOK_RETRY_SCHEDULE's form);
    the API checks the bounds."""
    try:
        return [float(delay) for delay in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not seconds separated by commas") from None


def _json_object(text: str) -> dict[str, Any]:
    """A JSON object given on the command line (a filter, an event's data); the API checks
    the rest."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError("not a JSON object")
    return parsed


def _filter(args: argparse.Namespace) -> dict[str, Any]:
    """The filter field given, if any; --no-filter sends null (no filter again)."""
    if args.no_filter:
        return {"filter": None}
    return {} if args.filter is None else {"filter": args.filter}


def _policy(args: argparse.Namespace) -> dict[str, Any]:
    """The retry policy fields given: only those; a --no-… option sends null (the global
    setting again)."""
    fields: dict[str, Any] = {}
    if args.no_retry_schedule:
        fields["retry_schedule"] = None
    elif args.retry_schedule is not None:
        fields["retry_schedule"] = args.retry_schedule
    if args.no_timeout:
        fields["timeout_seconds"] = None
    elif args.timeout is not None:
        fields["timeout_seconds"] = args.timeout
    if args.ordering is not None:
        fields["ordering"] = None if args.ordering == "none" else args.ordering
    return fields


async def create_endpoint(ctx: Context) -> None:
    args = ctx.args
    fields: dict[str, Any] = {
        "url": args.endpoint_url,
        "event_types": args.types or None,
        "description": args.description,
        "signature": args.signature,
        "disabled": args.disabled,
    }
    if args.rate_limit is not None:
        fields["rate_limit"] = args.rate_limit
    if args.header:
        fields["headers"] = dict(args.header)
    if args.channels:
        fields["channels"] = args.channels
    fields.update(_policy(args))
    fields.update(_filter(args))
    created = await ctx.api.create_endpoint(fields)
    ctx.out.show(created, lambda: views.endpoint_fields(created))


async def update_endpoint(ctx: Context) -> None:
    fields = _policy(ctx.args) | _filter(ctx.args)
    if not fields:
        raise UsageError(
            "give what to change: --retry-schedule, --timeout, --ordering or --filter (or "
            "their --no-…)"
        )
    updated = await ctx.api.update_endpoint(ctx.args.endpoint_id, fields)
    ctx.out.show(updated, lambda: views.endpoint_fields(updated))


async def test_filter(ctx: Context) -> None:
    args = ctx.args
    event = {"type": args.event_type, "data": args.data, "channels": args.channels}
    verdict = await ctx.api.test_filter(args.endpoint_id, event)
    ctx.out.show(verdict, lambda: views.filter_verdict(verdict))


async def show_endpoint(ctx: Context) -> None:
    endpoint = await ctx.api.endpoint(ctx.args.endpoint_id)
    ctx.out.show(endpoint, lambda: views.endpoint_fields(endpoint))


async def enable_endpoint(ctx: Context) -> None:
    endpoint = await ctx.api.set_enabled(ctx.args.endpoint_id, True)
    ctx.out.show(endpoint, lambda: views.endpoint_fields(endpoint))


async def disable_endpoint(ctx: Context) -> None:
    endpoint = await ctx.api.set_enabled(ctx.args.endpoint_id, False)
    ctx.out.show(endpoint, lambda: views.endpoint_fields(endpoint))


async def rotate_secret(ctx: Context) -> None:
    rotated = await ctx.api.rotate_secret(ctx.args.endpoint_id, ctx.args.grace_period)
    ctx.out.show(rotated, lambda: views.endpoint_fields(rotated))


async def recover_endpoint(ctx: Context) -> None:
    job = await ctx.api.recover(ctx.args.endpoint_id, ctx.args.since, ctx.args.until)
    await follow_job(ctx, job)


def register(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    group = commands.add_parser("endpoints", help="list and manage endpoints (over the API)")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, handler: Handler, text: str) -> argparse.ArgumentParser:
        parser = add_action(actions, common, name, handler, text)
        add_app_option(parser)
        return parser

    listing = action("list", list_endpoints, "list endpoints, newest first")
    add_paging(listing)
    listing.add_argument("--all", action="store_true", help="every page")

    create = action("create", create_endpoint, "create an endpoint; prints its secret")
    create.add_argument("endpoint_url", metavar="URL")
    create.add_argument(
        "--type", dest="types", action="append", metavar="TYPE", help="repeat; none: every type"
    )
    create.add_argument("--description", default="")
    create.add_argument("--signature", choices=("hmac", "ed25519"), default="hmac")
    create.add_argument("--rate-limit", type=float, metavar="PER_SECOND")
    create.add_argument("--header", type=_header, action="append", metavar="NAME=VALUE")
    create.add_argument("--disabled", action="store_true", help="create it disabled")
    create.add_argument(
        "--channel", dest="channels", action="append", metavar="CHANNEL",
        help="repeat; it then receives only the events that carry one of them",
    )  # fmt: skip
    create.add_argument("--retry-schedule", type=_schedule, metavar="0,5,300", help=SCHEDULE_HELP)
    create.add_argument("--timeout", type=float, metavar="SECONDS", help=TIMEOUT_HELP)
    create.add_argument("--filter", type=_json_object, metavar="JSON", help=FILTER_HELP)
    create.add_argument("--ordering", choices=("fifo", "none"), help=ORDERING_HELP)
    # Nothing to clear yet.
    create.set_defaults(no_retry_schedule=False, no_timeout=False, no_filter=False)

    update = action(
        "update", update_endpoint, "change an endpoint's retry policy, ordering or filter"
    )
    update.add_argument("endpoint_id", metavar="ENDPOINT_ID")
    schedule = update.add_mutually_exclusive_group()
    schedule.add_argument("--retry-schedule", type=_schedule, metavar="0,5,300", help=SCHEDULE_HELP)
    schedule.add_argument(
        "--no-retry-schedule", action="store_true", help="follow the global schedule again"
    )
    timeout = update.add_mutually_exclusive_group()
    timeout.add_argument("--timeout", type=float, metavar="SECONDS", help=TIMEOUT_HELP)
    timeout.add_argument("--no-timeout", action="store_true", help="the global timeout again")
    update.add_argument("--ordering", choices=("fifo", "none"), help=ORDERING_HELP)
    payload = update.add_mutually_exclusive_group()
    payload.add_argument("--filter", type=_json_object, metavar="JSON", help=FILTER_HELP)
    payload.add_argument("--no-filter", action="store_true", help="every event of its types")

    tester = action(
        "test-filter",
        test_filter,
        "whether its filter passes an event, and the clause that decided",
    )
    tester.add_argument("endpoint_id", metavar="ENDPOINT_ID")
    tester.add_argument("--type", dest="event_type", required=True, metavar="TYPE")
    tester.add_argument("--data", type=_json_object, default={}, metavar="JSON")
    tester.add_argument(
        "--channel", dest="channels", action="append", metavar="CHANNEL", help="repeat"
    )

    for name, handler, text in (
        ("show", show_endpoint, "one endpoint"),
        ("enable", enable_endpoint, "send to it again"),
        ("disable", disable_endpoint, "stop sending to it (its events are kept)"),
    ):
        action(name, handler, text).add_argument("endpoint_id", metavar="ENDPOINT_ID")

    rotate = action("rotate-secret", rotate_secret, "make a new signing key current")
    rotate.add_argument("endpoint_id", metavar="ENDPOINT_ID")
    rotate.add_argument(
        "--grace-period", type=int, metavar="SECONDS", help="how long the old key keeps signing"
    )

    recover = action("recover", recover_endpoint, "re-send its failed and disabled deliveries")
    recover.add_argument("endpoint_id", metavar="ENDPOINT_ID")
    recover.add_argument("--since", type=instant, required=True, help="ISO 8601, or 2h, 7d…")
    recover.add_argument("--until", type=instant, help="ISO 8601, or 2h, 7d… (default now)")
    add_wait_option(recover)
