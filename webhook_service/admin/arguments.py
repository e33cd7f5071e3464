"""Command-line argument types and the options every admin command shares."""

from __future__ import annotations

import argparse
import os
import re
from datetime import UTC, datetime, timedelta

from webhook_service.timeutil import iso, now_ms, parse_iso

DEFAULT_URL = "http://127.0.0.1:8000"
_RELATIVE = re.compile(r"^(\d+)(s|m|min|h|d)$")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def span_seconds(text: str) -> int | None:
    """A span (``90s``, ``15m``, ``2h``, ``7d``) in seconds; None when ``text`` is none."""
    match = _RELATIVE.match(text.strip())
    return None if match is None else int(match.group(1)) * _UNITS[match.group(2)]


def instant(text: str, now: int | None = None) -> str:
    """An ISO 8601 instant, or a span back from now (``90s``, ``15m``, ``2h``, ``7d``), as the
    ISO 8601 UTC the API takes."""
    seconds = span_seconds(text)
    if seconds is not None:
        base = datetime.fromtimestamp((now_ms() if now is None else now) / 1000, tz=UTC)
        return iso(int((base - timedelta(seconds=seconds)).timestamp() * 1000))
    try:
        return iso(parse_iso(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither an ISO 8601 time nor a span like 15m, 2h, 7d"
        ) from None


def common_options() -> argparse.ArgumentParser:
    """--url, --key, --json: a parent parser, so they may follow the subcommand."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection and output")
    group.add_argument(
        "--url",
        default=os.environ.get("WEBHOOK_API_URL", DEFAULT_URL),
        help="the API's base URL (env WEBHOOK_API_URL; default %(default)s)",
    )
    group.add_argument(
        "--key",
        default=os.environ.get("WEBHOOK_API_KEY"),
        help="an API key (env WEBHOOK_API_KEY, which keeps it out of the process list)",
    )
    group.add_argument("--json", action="store_true", help="print the API's JSON, for scripts")
    return parent


def add_delivery_filters(parser: argparse.ArgumentParser, *, history: bool) -> None:
    """The filters of GET /v1/deliveries; ``history=False``: only those bulk retry takes."""
    parser.add_argument("--endpoint", dest="endpoint_id", metavar="ENDPOINT_ID")
    parser.add_argument("--event", dest="event_id", metavar="EVENT_ID")
    parser.add_argument(
        "--status", choices=("pending", "scheduled", "succeeded", "failed", "disabled")
    )
    parser.add_argument("--event-type", metavar="TYPE")
    parser.add_argument("--since", type=instant, help="ISO 8601, or a span back: 15m, 2h, 7d")
    parser.add_argument("--until", type=instant, help="ISO 8601, or a span back: 15m, 2h, 7d")
    if history:
        parser.add_argument(
            "--status-class", choices=("2xx", "3xx", "4xx", "5xx", "timeout", "network")
        )
        parser.add_argument("--attempts-min", type=int, metavar="N")
        parser.add_argument("--attempts-max", type=int, metavar="N")


def add_paging(parser: argparse.ArgumentParser, default: int = 50) -> None:
    parser.add_argument("--limit", type=int, default=default, help="items per page (1-250)")
    parser.add_argument("--cursor", help="the next_cursor of a previous page")


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


# What a command acts on without --app: the flat routes' application.
IN_DEFAULT = "default: the default application (a key bound to one: its own)"
# The history lists and bulk retry on the flat routes: the operator's view.
IN_EVERY = "default: every application the key may see"
# One event or delivery by its id on the flat routes.
IN_ANY = "default: whichever it belongs to, if the key may see it"


def add_app_option(parser: argparse.ArgumentParser, without: str = IN_DEFAULT) -> None:
    """--app: act within one application, through its routes /v1/applications/APP/…"""
    parser.add_argument(
        "--app",
        metavar="APP",
        help=f"within this application, its id (app_…) or uid ({without})",
    )
