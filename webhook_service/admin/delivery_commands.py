"""``webhook-service deliveries …``: the history, one delivery's attempts, retries."""

from __future__ import annotations

import argparse

from webhook_service.admin import views
from webhook_service.admin.api import BULK_RETRY_FILTERS, DELIVERY_FILTERS
from webhook_service.admin.arguments import (
    IN_ANY,
    IN_EVERY,
    add_app_option,
    add_delivery_filters,
    add_paging,
)
from webhook_service.admin.command import (
    Context,
    Handler,
    Subcommands,
    UsageError,
    add_action,
    add_wait_option,
    follow_job,
)


def _filters(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, str | int | None]:
    return {name: getattr(args, name) for name in names}


async def list_deliveries(ctx: Context) -> None:
    query = {**_filters(ctx.args, DELIVERY_FILTERS), "limit": ctx.args.limit,
             "cursor": ctx.args.cursor}  # fmt: skip
    page = await ctx.api.deliveries(query)
    ctx.out.show(page, lambda: views.deliveries_table(page["data"]))
    ctx.out.next_page(page["next_cursor"])


async def show_delivery(ctx: Context) -> None:
    delivery = await ctx.api.delivery(ctx.args.delivery_id)

    def text() -> str:
        attempts = views.attempts_table(delivery["attempt_log"])
        shown = f"{views.delivery_fields(delivery)}\n\n{attempts}"
        if ctx.args.headers:
            shown += f"\n\n{views.attempt_headers(delivery['attempt_log'])}"
        return shown

    ctx.out.show(delivery, text)


async def retry_deliveries(ctx: Context) -> None:
    """One delivery by id, or, given filters and no id, every one they match (a job)."""
    filters = _filters(ctx.args, BULK_RETRY_FILTERS)
    chosen = any(value is not None for value in filters.values())
    if ctx.args.delivery_id is not None:
        if chosen:
            raise UsageError("give a delivery id or filters, not both")
        delivery = await ctx.api.retry(ctx.args.delivery_id)
        ctx.out.show(delivery, lambda: views.delivery_fields(delivery))
        return
    if not chosen:
        # Without any filter the API would re-send every failed delivery there is: that must
        # be asked for in words (--status failed), never happen by a forgotten argument.
        raise UsageError("give a delivery id, or filters such as --status failed")
    await follow_job(ctx, await ctx.api.bulk_retry(filters))


def register(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    group = commands.add_parser("deliveries", help="delivery history, attempts and retries")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, handler: Handler, text: str, without: str) -> argparse.ArgumentParser:
        parser = add_action(actions, common, name, handler, text)
        add_app_option(parser, without)
        return parser

    listing = action(
        "list", list_deliveries, "list deliveries, newest first, with filters", IN_EVERY
    )
    add_delivery_filters(listing, history=True)
    add_paging(listing)

    show = action("show", show_delivery, "a delivery and its attempts", IN_ANY)
    show.add_argument("delivery_id", metavar="DELIVERY_ID")
    show.add_argument(
        "--headers", action="store_true",
        help="also each attempt's headers: what we sent (the endpoint's own values "
        "[redacted]) and what the receiver answered",
    )  # fmt: skip

    retry = action(
        "retry", retry_deliveries,
        "retry one delivery now, or (with filters, no id) every delivery they match",
        "default: one by id, whichever it belongs to; with filters, every application "
        "the key may see",
    )  # fmt: skip
    retry.add_argument("delivery_id", nargs="?", metavar="DELIVERY_ID")
    add_delivery_filters(retry, history=False)
    add_wait_option(retry)
