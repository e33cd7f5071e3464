"""Events: the event history with the filters of ``GET /v1/events`` (type, time range, the
key that sent it, the application) and a search by id, paged with the API's cursor; one
event with its payload, its schedule and every delivery it made.

The list is the SQL log's, which follows the store by about WEBHOOK_LOG_SHIP_INTERVAL; an
event looked up by id is found as soon as it is accepted (``GET /v1/events/{id}`` reads
the store first). The payload is the producer's JSON, shown pretty-printed and escaped like
everything else on a page (markup.render): a ``<script>`` in it stays text.
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.client.errors import APIError
from webhook_service.dashboard import layout
from webhook_service.dashboard.access import explain, redirect, signed_in
from webhook_service.dashboard.catalog import pretty
from webhook_service.dashboard.delivery_pages import delivery_headers, delivery_rows, text_input
from webhook_service.dashboard.endpoint_pages import facts_list
from webhook_service.dashboard.markup import Markup, join, render, with_query
from webhook_service.dashboard.places import Place
from webhook_service.dashboard.session import Session

EVENTS = "events"
PAGE_SIZES = ("50", "25", "100", "250")
# The list's filters, by the API's names (GET /v1/events), and the page's own search by id.
EVENT_FILTERS = ("type", "since", "until", "key_id", "application")
ID_FIELD = "id"
_NO_SUCH = "No event has this id (or it is another application's)."


def search_form(place: Place, query: dict[str, str]) -> Markup:
    """The API's filters and the id, submitted as GET: a search is a URL to share."""
    get = query.get
    fields = [
        text_input(ID_FIELD, "Event id", get(ID_FIELD, ""), "msg_…"),
        text_input("type", "Type", get("type", ""), "invoice.paid"),
        text_input("since", "Since (UTC)", get("since", ""), "2026-01-31T12:00Z"),
        text_input("until", "Until (UTC)", get("until", ""), "2026-01-31T13:00Z"),
        text_input("key_id", "Sent with key", get("key_id", ""), "key_…"),
    ]
    if place.app is None:
        # Within an application the list is that application's already.
        fields.append(
            text_input("application", "Application", get("application", ""), "app_… or uid")
        )
    sizes = join(
        render(
            '<option value="$v"$sel>$v</option>',
            v=v,
            sel=Markup(" selected") if v == get("limit", PAGE_SIZES[0]) else Markup(""),
        )
        for v in PAGE_SIZES
    )
    fields.append(render('<label>Per page <select name="limit">$o</select></label>', o=sizes))
    return render(
        '<form method="get" action="$action" class="filters" role="search">$fields'
        '<button type="submit">Search</button> <a href="$action">Clear</a></form>',
        action=place.path(EVENTS),
        fields=join(fields),
    )


def _short(event_id: str) -> str:
    return event_id[:4] + "…" + event_id[-10:] if len(event_id) > 24 else event_id


def _application_link(place: Place, record: JSON) -> Markup | str:
    owner = place.of(record)
    if owner.app is None:
        return d.application(record)
    return render('<a href="$href">$app</a>', href=owner.home, app=owner.app)


def event_headers(place: Place) -> list[str]:
    headers = ["Event", "Type", "Channels", "Accepted", "Deliver at", "Deliveries", "Payload"]
    if place.app is None:
        headers.insert(2, "Application")
    return headers


def event_rows(place: Place, events: list[JSON]) -> list[list[Markup | str | int]]:
    """One row each, linked within this place; a flat list (every application the key may
    see) also says which application each event is of."""
    rows: list[list[Markup | str | int]] = []
    for event in events:
        owner = place.of(event)
        row: list[Markup | str | int] = [
            render(
                '<a href="$href" title="$id">$short</a>',
                href=owner.path(EVENTS, event["id"]),
                id=event["id"],
                short=_short(event["id"]),
            ),
            event["type"],
            d.channels(event),
            d.moment(event["timestamp"]),
            d.moment(event.get("deliver_at")) if event.get("deliver_at") else "",
            event["deliveries"],
            "deleted" if event.get("payload_deleted") else "kept",
        ]
        if place.app is None:
            row.insert(2, _application_link(place, event))
        rows.append(row)
    return rows


@signed_in
async def events(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    query = {
        k: v for k, v in request.query.items() if v and k in (*EVENT_FILTERS, "cursor", "limit")
    }
    wanted = request.query.get(ID_FIELD, "").strip()
    note, error = "", False
    if wanted:
        try:
            found = await api.event(wanted)
        except APIError as exc:
            if exc.status != 404:
                raise
            note, error = _NO_SUCH, True
        else:
            return redirect(place.of(found).path(EVENTS, found["id"]))
    page: JSON = {"data": [], "next_cursor": None}
    try:
        page = await api.events({"limit": PAGE_SIZES[0], **query})
    except APIError as exc:
        if exc.status != 422:
            raise
        note, error = explain(exc), True
    table = layout.table(
        event_headers(place),
        event_rows(place, page["data"]),
        "No event matches this search. The list follows new events by a few seconds; "
        "an event's id finds it at once.",
    )
    more = layout.next_page(place.path(EVENTS), query, page["next_cursor"])
    body = join([search_form(place, {**query, ID_FIELD: wanted}), table, more])
    return layout.page("Events", body, session, place=place, active=EVENTS, note=note, error=error)


def payload(event: JSON) -> Markup:
    """The event's data as the producer sent it, indented; none once expunged."""
    if event.get("data") is None:
        return render(
            '<p class="empty">Its payload was deleted (<code>DELETE …/events/{id}/payload</code>'
            " or retention): only its record and deliveries are kept.</p>"
        )
    return render('<pre class="payload">$p</pre>', p=pretty(event["data"]))


def event_facts(place: Place, event: JSON) -> Markup:
    facts: list[tuple[str, object]] = [
        ("Id", render("<code>$id</code>", id=event["id"])),
        ("Type", event["type"]),
        ("Application", _application_link(place, event)),
        ("Channels", d.channels(event)),
        ("Accepted", d.moment(event["timestamp"])),
    ]
    if event.get("deliver_at"):
        facts.append(("Deliver at", d.moment(event["deliver_at"])))
    if event.get("example"):
        facts.append(("Example", "yes: sent from the catalog to one endpoint"))
    return facts_list(facts)


@signed_in
async def event_page(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    event = await api.event(request.match_info["event_id"])
    owner = place.of(event)
    deliveries = event.get("deliveries") or []
    every = with_query(owner.path("deliveries"), {"event_id": event["id"]})
    body = join(
        [
            event_facts(place, event),
            render("<h2>Payload</h2>"),
            payload(event),
            render("<h2>Deliveries</h2>"),
            layout.table(
                delivery_headers(owner),
                delivery_rows(owner, deliveries),
                "It matched no endpoint: nothing was sent.",
            ),
            render('<p><a href="$href">Its deliveries in the history</a></p>', href=every),
        ]
    )
    return layout.page(
        "Event",
        body,
        session,
        place=place,
        trail=[("Events", place.path(EVENTS))],
        active=EVENTS,
    )
