"""What every admin command is given, and how a long job is followed to its end."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeAlias

from webhook_service.admin import views
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.admin.output import Output
from webhook_service.admin.progress import JobProgress


class UsageError(Exception):
    """The command line asks for something that cannot be done; exit status 2."""


@dataclass
class Context:
    api: AdminApi
    args: argparse.Namespace
    out: Output
    key: str


Handler = Callable[[Context], Awaitable[None]]
# A string: argparse's class is generic only to type checkers.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_action(
    actions: Subcommands, common: argparse.ArgumentParser, name: str, handler: Handler, text: str
) -> argparse.ArgumentParser:
    """A leaf command: it takes the shared options and runs ``handler``."""
    parser = actions.add_parser(name, help=text, description=text, parents=[common])
    parser.set_defaults(admin=handler)
    return parser


async def follow_job(ctx: Context, job: JSON) -> None:
    """Draw the job's progress until it is done (unless --no-wait), then show where it ended."""
    if not ctx.args.wait:
        ctx.out.show(job, lambda: views.job_fields(job))
        ctx.out.note(f"follow it with: GET /v1/jobs/{job['id']}")
        return
    done = await ctx.api.wait_for_job(job, JobProgress(sys.stderr))
    ctx.out.show(done, lambda: views.job_fields(done))


def add_wait_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="start the job and return at once, without following its progress",
    )
