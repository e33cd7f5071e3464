"""``webhook-service applications …``: the tenants, each with its own endpoints, events and
history. List, create, show, update, delete; the other commands act within one with
``--app``."""

from __future__ import annotations

import argparse
from typing import Any

from webhook_service.admin import application_health as health
from webhook_service.admin import describe as d
from webhook_service.admin import views
from webhook_service.admin.arguments import add_paging, key_value
from webhook_service.admin.changes import set_or_clear
from webhook_service.admin.command import (
    Context,
    Handler,
    Subcommands,
    UsageError,
    add_action,
    add_wait_option,
    follow_job,
)
from webhook_service.admin.tables import render_fields
from webhook_service.portal_access import MAX_EXPIRES_IN, MIN_EXPIRES_IN, Capability

APP_HELP = "an application id (app_…) or uid"


async def list_applications(ctx: Context) -> None:
    page = await ctx.api.applications(ctx.args.limit, ctx.args.cursor, ctx.args.uid)
    found = await health.summaries(ctx.api, page["data"])
    # One deleted since it was listed is left out, as the dashboard leaves it.
    pairs = [(a, s) for a, s in zip(page["data"], found, strict=True) if s is not None]
    shown = {**page, "data": [{**a, "health": s.as_json()} for a, s in pairs]}
    ctx.out.show(shown, lambda: views.applications_table(pairs))
    ctx.out.next_page(page["next_cursor"])


async def create_application(ctx: Context) -> None:
    args = ctx.args
    fields: dict[str, Any] = {"name": args.name}
    if args.uid is not None:
        fields["uid"] = args.uid
    if args.metadata:
        fields["metadata"] = dict(args.metadata)
    if args.rate_limit is not None:
        fields["rate_limit"] = args.rate_limit
    created = await ctx.api.create_application(fields)
    ctx.out.show(created, lambda: views.application_fields(created))


async def show_application(ctx: Context) -> None:
    application = await ctx.api.application(ctx.args.app_ref)
    summary = await health.summary(ctx.api, application["id"])
    shown = {**application, "health": summary.as_json()}
    ctx.out.show(shown, lambda: views.application_fields(application, summary))


def changes(args: argparse.Namespace) -> dict[str, Any]:
    """The PATCH body ``applications update`` asks for: only what was given; null clears."""
    fields: dict[str, Any] = {}
    if args.name is not None:
        fields["name"] = args.name
    set_or_clear(fields, "uid", args.uid, clear=args.no_uid)
    set_or_clear(fields, "metadata", args.metadata, clear=args.no_metadata, convert=dict)
    set_or_clear(fields, "rate_limit", args.rate_limit, clear=args.no_rate_limit)
    return fields


async def update_application(ctx: Context) -> None:
    fields = changes(ctx.args)
    if not fields:
        raise UsageError("give what to change: --name, --uid, --metadata or --rate-limit")
    updated = await ctx.api.update_application(ctx.args.app_ref, fields)
    ctx.out.show(updated, lambda: views.application_fields(updated))


async def delete_application(ctx: Context) -> None:
    answer = await ctx.api.delete_application(ctx.args.app_ref)
    if "state" in answer:
        await follow_job(ctx, answer)
        return
    ctx.out.show(answer, lambda: f"deleted {ctx.args.app_ref}")


async def portal_link(ctx: Context) -> None:
    args = ctx.args
    made = await ctx.api.within(args.app_ref).portal_link(
        args.expires_in, args.capabilities, args.read_only
    )
    ctx.out.show(
        made,
        lambda: render_fields(
            [
                ("url", made["url"]),
                ("expires", d.moment(made["expires_at"])),
                ("capabilities", ", ".join(made["capabilities"])),
            ]
        ),
    )
    ctx.out.note(
        "whoever holds this link opens the portal until it expires; "
        f"end every link with: webhook-service applications portal-revoke {args.app_ref}"
    )


async def portal_revoke(ctx: Context) -> None:
    await ctx.api.within(ctx.args.app_ref).revoke_portal_links()
    ctx.out.show(
        {"revoked": True},
        lambda: f"every portal link and portal session of {ctx.args.app_ref} ended",
    )


def expiry(text: str) -> int:
    """``--expires-in``: whole seconds, within the API's bounds (said here, before a request)."""
    try:
        seconds = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if not MIN_EXPIRES_IN <= seconds <= MAX_EXPIRES_IN:
        raise argparse.ArgumentTypeError(
            f"between {MIN_EXPIRES_IN} and {MAX_EXPIRES_IN} seconds (7 days)"
        )
    return seconds


def register(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    group = commands.add_parser(
        "applications", help="list and manage applications (tenants), over the API"
    )
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, handler: Handler, text: str) -> argparse.ArgumentParser:
        return add_action(actions, common, name, handler, text)

    listing = action(
        "list", list_applications,
        "list applications, newest first, each with its health and volume (summed from its "
        "endpoints' stats: 1 + n requests an application of n endpoints)",
    )  # fmt: skip
    listing.add_argument("--uid", help="only the one with this uid")
    add_paging(listing)

    create = action(
        "create", create_application,
        "create an application; sending to its uid with the producer client needs no other step",
    )  # fmt: skip
    create.add_argument("name", metavar="NAME", help="what people call it")
    create.add_argument(
        "--uid", help="your own id for this customer: [A-Za-z0-9._-], not starting with app_"
    )
    create.add_argument(
        "--metadata", type=key_value, action="append", metavar="KEY=VALUE", help="repeat"
    )
    create.add_argument(
        "--rate-limit", type=float, metavar="PER_SECOND", help="events it may be sent a second"
    )

    action("show", show_application, "one application, with its health and volume").add_argument(
        "app_ref", metavar="APP", help=APP_HELP
    )

    update = action("update", update_application, "change an application; only what is given")
    update.add_argument("app_ref", metavar="APP", help=APP_HELP)
    update.add_argument("--name")
    uid = update.add_mutually_exclusive_group()
    uid.add_argument("--uid")
    uid.add_argument("--no-uid", action="store_true", help="remove its uid")
    metadata = update.add_mutually_exclusive_group()
    metadata.add_argument(
        "--metadata", type=key_value, action="append", metavar="KEY=VALUE",
        help="repeat; replaces all of its metadata",
    )  # fmt: skip
    metadata.add_argument("--no-metadata", action="store_true", help="remove all its metadata")
    limit = update.add_mutually_exclusive_group()
    limit.add_argument("--rate-limit", type=float, metavar="PER_SECOND")
    limit.add_argument("--no-rate-limit", action="store_true", help="remove its rate limit")

    delete = action(
        "delete", delete_application,
        "delete an application: its endpoints, its pending deliveries (failed, "
        "application_deleted) and, as a job, its history",
    )  # fmt: skip
    delete.add_argument("app_ref", metavar="APP", help=APP_HELP)
    add_wait_option(delete)

    link = action(
        "portal-link", portal_link,
        "make a link to the subscriber portal of one application (POST "
        "/v1/applications/{app}/portal-access); prints it and its expiry, --json the answer",
    )  # fmt: skip
    link.add_argument("app_ref", metavar="APP", help=APP_HELP)
    link.add_argument(
        "--expires-in", type=expiry, metavar="SECONDS",
        help=f"how long it opens the portal: {MIN_EXPIRES_IN} to {MAX_EXPIRES_IN} (default 3600)",
    )  # fmt: skip
    link.add_argument(
        "--capability", dest="capabilities", action="append",
        choices=[c.value for c in Capability], metavar="NAME",
        help="repeat; what the subscriber may do (view is always held; default: all but "
        "view_secrets): " + ", ".join(c.value for c in Capability),
    )  # fmt: skip
    link.add_argument(
        "--read-only", action="store_true", help="view alone, whatever --capability says"
    )

    action(
        "portal-revoke", portal_revoke,
        "end every portal link and every open portal session of one application at once",
    ).add_argument("app_ref", metavar="APP", help=APP_HELP)  # fmt: skip
