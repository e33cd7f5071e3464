"""The event-type catalog as a person reads it, written once for the dashboard and the
portal: each type's name, what it means, the shape of its data (its JSON Schema) and an
example, from ``GET /v1/event-types``.

The same card is the catalog page (the dashboard's event_type_pages.py, the portal's
catalog.py) and each choice in the endpoint form (endpoint_form.py), so what a person
ticks is what they read. It lives on the dashboard's side because the portal is built of
the dashboard's parts, never the other way round.
"""

from __future__ import annotations

from collections.abc import Collection

import orjson

from webhook_service.admin.api import JSON, AdminApi
from webhook_service.client.errors import APIError
from webhook_service.dashboard.layout import badge
from webhook_service.dashboard.markup import Markup, join, render

# The catalog is read whole (it is the operator's list of types, tens not thousands);
# past this many pages it is cut, and the page says so.
_PAGE = 250
_MAX_PAGES = 8


async def event_types(api: AdminApi) -> list[JSON]:
    """Every type of the catalog but the archived ones, in the API's order."""
    found: list[JSON] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await api.call("GET", "/v1/event-types", query={"limit": _PAGE, "cursor": cursor})
        found.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            break
    return found


async def event_types_or_none(api: AdminApi) -> list[JSON]:
    """The catalog, or none for a key that may not read it (no events:read): a page that
    only offers its types (the endpoint form, Send example) still shows the rest."""
    try:
        return await event_types(api)
    except APIError as exc:
        if exc.status != 403:
            raise
        return []


def pretty(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def example_of(event_type: JSON) -> JSON | None:
    examples = event_type.get("examples") or []
    return examples[0] if examples else None


def _details(event_type: JSON) -> Markup:
    parts = []
    schema = event_type.get("schema")
    if schema is not None:
        parts.append(
            render("<details><summary>Schema of its data</summary><pre>$s</pre></details>",
                   s=pretty(schema))
        )  # fmt: skip
    example = example_of(event_type)
    if example is not None:
        parts.append(
            render("<details><summary>Example data</summary><pre>$e</pre></details>",
                   e=pretty(example))
        )  # fmt: skip
    return join(parts)


def _about(event_type: JSON) -> Markup:
    flags = [badge("deprecated", "warn")] if event_type.get("deprecated") else []
    group = event_type.get("group")
    return render(
        '<span class="type-name"><code>$name</code>$flags</span>$group'
        '<span class="type-description">$description</span>',
        name=event_type["name"],
        flags=join(flags),
        group=render(' <span class="group">$g</span>', g=group) if group else Markup(""),
        description=event_type.get("description") or "",
    )


def card(event_type: JSON) -> Markup:
    return render(
        '<li class="event-type">$about$details</li>',
        about=_about(event_type),
        details=_details(event_type),
    )


def choices(catalog: list[JSON], chosen: Collection[str]) -> Markup:
    """One checkbox per type, each with its card; a type the endpoint takes that the
    catalog no longer lists stays as a choice too, so saving the form never drops it."""
    known = {t["name"] for t in catalog}
    listed = [*catalog, *({"name": n} for n in sorted(set(chosen) - known))]
    items = [
        render(
            '<li class="event-type"><label><input type="checkbox" name="event_types" '
            'value="$name"$checked> $about</label>$details</li>',
            name=t["name"],
            checked=Markup(" checked") if t["name"] in chosen else Markup(""),
            about=_about(t),
            details=_details(t),
        )
        for t in listed
    ]
    return render('<ul class="catalog">$items</ul>', items=join(items))
