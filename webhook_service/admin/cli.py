"""The admin commands of ``webhook-service``, added to its argument parser, and how they run.

Every command is one or a few calls to the HTTP API with the key given, so a key's scopes
bound what its holder can do here exactly as over HTTP.
"""

from __future__ import annotations

import argparse
import asyncio

from webhook_service.admin import (
    application_commands,
    delivery_commands,
    endpoint_commands,
    event_commands,
    event_type_commands,
    listen,
    stats_command,
)
from webhook_service.admin.api import connect
from webhook_service.admin.arguments import common_options
from webhook_service.admin.command import Context, Subcommands, UsageError
from webhook_service.admin.output import Output
from webhook_service.client.errors import APIError, TransportError

EXIT_FAILED = 1
EXIT_USAGE = 2


def register(commands: Subcommands) -> None:
    common = common_options()
    for module in (
        application_commands,
        endpoint_commands,
        event_commands,
        event_type_commands,
        delivery_commands,
        stats_command,
    ):
        module.register(commands, common)
    # The first steps' two commands, at the top level: a receiver of one's own, and a send.
    listen.register(commands, common)
    event_commands.register_send(commands, common)


def explain(error: APIError) -> str:
    problem = error.problem
    lines = [f"error: {problem.status} {problem.title or problem.kind}: {problem.detail}".rstrip()]
    lines += [f"  {e.get('pointer', '')}: {e.get('detail', '')}" for e in problem.errors]
    return "\n".join(lines)


async def _run(args: argparse.Namespace, key: str, out: Output) -> None:
    # --app: the endpoint, event and delivery commands use that application's routes.
    async with connect(args.url, key, application=getattr(args, "app", None)) as api:
        await args.admin(Context(api, args, out, key))


def run(args: argparse.Namespace) -> int:
    """Run the admin command ``args`` names; the exit status."""
    out = Output(args.json)
    if not args.key:
        out.error("error: give an API key with --key or WEBHOOK_API_KEY")
        return EXIT_USAGE
    try:
        asyncio.run(_run(args, args.key, out))
    except UsageError as exc:
        out.error(f"error: {exc}")
        return EXIT_USAGE
    except APIError as exc:
        out.error(explain(exc))
        return EXIT_FAILED
    except TransportError as exc:
        out.error(f"error: {exc}")
        return EXIT_FAILED
    return 0
