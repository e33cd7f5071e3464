"""``webhook-service stats [ENDPOINT_ID]``: every endpoint's health at a glance, or one's;
those of one application with ``--app``."""

from __future__ import annotations

import argparse

from webhook_service.admin import views
from webhook_service.admin.arguments import add_app_option
from webhook_service.admin.command import Context, Subcommands, add_action


async def show_stats(ctx: Context) -> None:
    if ctx.args.endpoint_id:
        stats = await ctx.api.stats(ctx.args.endpoint_id)
        ctx.out.show(stats, lambda: views.stats_windows(stats))
        return
    endpoints = await ctx.api.all_endpoints()
    figures = await ctx.api.stats_for(endpoints)
    pairs = list(zip(endpoints, figures, strict=True))
    ctx.out.show(figures, lambda: views.stats_table(pairs))


def register(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    text = "deliveries, success rate, latency and backlog per endpoint (last hour and day)"
    stats = add_action(commands, common, "stats", show_stats, text)
    stats.add_argument("endpoint_id", nargs="?", metavar="ENDPOINT_ID", help="just this one")
    add_app_option(stats)
