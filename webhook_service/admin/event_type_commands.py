"""``webhook-service event-types …``: the event-type catalog, over the API. List, show,
create, update, archive, and import an OpenAPI 3.1 document's webhooks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
import yaml

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON
from webhook_service.admin.arguments import add_paging
from webhook_service.admin.changes import set_or_clear
from webhook_service.admin.command import Context, Handler, Subcommands, UsageError, add_action
from webhook_service.admin.tables import Column, render, render_fields

NAME_HELP = "the type's name, e.g. invoice.paid"


def read_document(path: str) -> Any:
    """A JSON or YAML file (JSON is read as YAML too), as the API takes it: JSON."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is neither JSON nor YAML: {exc}") from None
    try:
        # YAML's dates become strings, as the API would read them.
        return orjson.loads(orjson.dumps(loaded, option=orjson.OPT_NON_STR_KEYS))
    except TypeError as exc:
        raise UsageError(f"{path} holds a value JSON cannot: {exc}") from None


def json_object(text: str) -> dict[str, Any]:
    """An ``--example``: one JSON object."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("an example is a JSON object")
    return value


def _flags(t: JSON) -> str:
    shown = [word for word in ("deprecated", "archived") if t[word]]
    return ", ".join(shown) or d.NOTHING


def types_table(types: list[JSON]) -> str:
    rows = [
        (t["name"], t["group"] or d.NOTHING, "yes" if t["schema"] is not None else "no",
         len(t["examples"]), _flags(t), t["description"] or d.NOTHING)
        for t in types
    ]  # fmt: skip
    columns: list[Column | str] = [
        "NAME",
        Column("GROUP", max_width=30),
        "SCHEMA",
        Column("EXAMPLES", right=True),
        "FLAGS",
        Column("DESCRIPTION", max_width=60),
    ]
    return render(columns, rows)


def type_fields(t: JSON) -> str:
    fields: list[tuple[str, object]] = [
        ("name", t["name"]),
        ("group", t["group"] or d.NOTHING),
        ("description", t["description"] or d.NOTHING),
        ("flags", _flags(t)),
        ("created", d.moment(t["created_at"])),
        ("updated", d.moment(t["updated_at"])),
        ("examples", len(t["examples"])),
    ]
    text = render_fields(fields)
    if t["schema"] is not None:
        text += "\nschema:\n" + orjson.dumps(t["schema"], option=orjson.OPT_INDENT_2).decode()
    return text


async def list_types(ctx: Context) -> None:
    args = ctx.args
    page = await ctx.api.event_types(
        args.limit, args.cursor, include_archived=args.archived, group=args.group
    )
    ctx.out.show(page, lambda: types_table(page["data"]))
    ctx.out.next_page(page["next_cursor"])


async def show_type(ctx: Context) -> None:
    found = await ctx.api.event_type(ctx.args.name)
    ctx.out.show(found, lambda: type_fields(found))


async def create_type(ctx: Context) -> None:
    args = ctx.args
    fields: JSON = {"name": args.name, "deprecated": args.deprecated}
    if args.description is not None:
        fields["description"] = args.description
    if args.group is not None:
        fields["group"] = args.group
    if args.schema is not None:
        fields["schema"] = read_document(args.schema)
    if args.example:
        fields["examples"] = args.example
    made = await ctx.api.create_event_type(fields)
    ctx.out.show(made, lambda: type_fields(made))


def changes(args: argparse.Namespace) -> JSON:
    """The PATCH body ``event-types update`` asks for: only what was given; null clears."""
    fields: JSON = {}
    if args.description is not None:
        fields["description"] = args.description
    set_or_clear(fields, "group", args.group, clear=args.no_group)
    set_or_clear(fields, "schema", args.schema, clear=args.no_schema, convert=read_document)
    if args.example:
        fields["examples"] = args.example
    if args.deprecated is not None:
        fields["deprecated"] = args.deprecated
    if args.restore:
        fields["archived"] = False
    return fields


async def update_type(ctx: Context) -> None:
    fields = changes(ctx.args)
    if not fields:
        raise UsageError(
            "give what to change: --description, --group, --schema, --example, "
            "--deprecated or --restore"
        )
    updated = await ctx.api.update_event_type(ctx.args.name, fields)
    ctx.out.show(updated, lambda: type_fields(updated))


async def archive_type(ctx: Context) -> None:
    archived = await ctx.api.archive_event_type(ctx.args.name)
    ctx.out.show(archived, lambda: f"archived {archived['name']} (restore: update --restore)")


def import_lines(result: JSON) -> str:
    lines = [
        f"{word}: {', '.join(result[word]) or d.NOTHING}"
        for word in ("created", "updated", "unchanged")
    ]
    lines += [f"not imported: {e['name'] or e['pointer']}: {e['detail']}" for e in result["errors"]]
    return "\n".join(lines)


async def import_types(ctx: Context) -> None:
    result = await ctx.api.import_event_types(read_document(ctx.args.file))
    ctx.out.show(result, lambda: import_lines(result))


def _definition_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--description")
    parser.add_argument(
        "--example", type=json_object, action="append", metavar="JSON",
        help="an example data object; repeat (replaces every example)",
    )  # fmt: skip


def register(commands: Subcommands, common: argparse.ArgumentParser) -> None:
    group = commands.add_parser(
        "event-types", help="the event-type catalog (every application's), over the API"
    )
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, handler: Handler, text: str) -> argparse.ArgumentParser:
        return add_action(actions, common, name, handler, text)

    listing = action("list", list_types, "the catalog's types by name (archived ones left out)")
    listing.add_argument("--group", help="only this group's")
    listing.add_argument("--archived", action="store_true", help="archived types too")
    add_paging(listing)

    action("show", show_type, "one type, with its schema").add_argument(
        "name", metavar="NAME", help=NAME_HELP
    )

    create = action("create", create_type, "add a type to the catalog")
    create.add_argument("name", metavar="NAME", help=NAME_HELP)
    _definition_options(create)
    create.add_argument("--group")
    create.add_argument(
        "--schema", metavar="FILE", help="a JSON Schema 2020-12 for its data (JSON or YAML)"
    )
    create.add_argument("--deprecated", action="store_true")

    update = action("update", update_type, "change a type; only what is given")
    update.add_argument("name", metavar="NAME", help=NAME_HELP)
    _definition_options(update)
    grouping = update.add_mutually_exclusive_group()
    grouping.add_argument("--group")
    grouping.add_argument("--no-group", action="store_true", help="remove its group")
    schema = update.add_mutually_exclusive_group()
    schema.add_argument("--schema", metavar="FILE", help="a JSON Schema 2020-12 (JSON or YAML)")
    schema.add_argument("--no-schema", action="store_true", help="remove its schema")
    deprecation = update.add_mutually_exclusive_group()
    deprecation.add_argument("--deprecated", action="store_true", default=None)
    deprecation.add_argument("--not-deprecated", dest="deprecated", action="store_false")
    update.add_argument("--restore", action="store_true", help="un-archive it")

    action(
        "archive", archive_type,
        "archive a type: kept and readable, left out of the list, its name still taken",
    ).add_argument("name", metavar="NAME", help=NAME_HELP)  # fmt: skip

    action(
        "import", import_types,
        "import an OpenAPI 3.1 document's webhooks (JSON or YAML): created or updated",
    ).add_argument("file", metavar="FILE")  # fmt: skip
