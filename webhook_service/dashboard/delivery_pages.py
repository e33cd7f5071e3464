"""Deliveries: the history with the API's filters, one delivery's attempts, retries, jobs."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from webhook_service.admin import describe as d
from webhook_service.admin.api import BULK_RETRY_FILTERS, DELIVERY_FILTERS, JSON, AdminApi
from webhook_service.api.body import read_form
from webhook_service.client.errors import APIError
from webhook_service.dashboard import charts, layout
from webhook_service.dashboard.access import explain, redirect, signed_in
from webhook_service.dashboard.actions import dashboard_action
from webhook_service.dashboard.endpoint_pages import facts_list
from webhook_service.dashboard.markup import Markup, join, render
from webhook_service.dashboard.places import Place
from webhook_service.dashboard.session import Session
from webhook_service.store.states import LIVE_STATUSES
from webhook_service.timeutil import now_ms, parse_iso

STATUS_BADGE = {
    "succeeded": "ok", "failed": "bad", "pending": "warn", "scheduled": "later", "disabled": "off",
}  # fmt: skip
STATUSES = ("pending", "scheduled", "succeeded", "failed", "disabled")
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx", "timeout", "network")
PAGE_SIZES = ("50", "25", "100", "250")
# While something is under way, its page reloads itself this often (seconds).
REFRESH = 1
BODY_PREVIEW = 60
# A job's kind in words; one without its own (an application's deletion) by its name.
JOB_KINDS = {"retry": "bulk retry", "recover": "recovery"}


def _select(name: str, label: str, options: tuple[str, ...], chosen: str, blank: str) -> Markup:
    items = [render('<option value="">$blank</option>', blank=blank)] if blank else []
    items += [
        render(
            '<option value="$v"$sel>$v</option>',
            v=o,
            sel=Markup(" selected") if o == chosen else Markup(""),
        )
        for o in options
    ]
    return render(
        '<label>$label <select name="$name">$items</select></label>',
        label=label,
        name=name,
        items=join(items),
    )


def text_input(
    name: str, label: str, value: str, placeholder: str = "", kind: str = "text"
) -> Markup:
    return render(
        '<label>$label <input type="$kind" name="$name" value="$value" placeholder="$ph"></label>',
        label=label,
        kind=kind,
        name=name,
        value=value,
        ph=placeholder,
    )


def filter_form(place: Place, query: dict[str, str]) -> Markup:
    """The API's own filters, by the API's own names, submitted as GET: a view is a URL."""
    get = query.get
    fields = [
        _select("status", "Status", STATUSES, get("status", ""), "any"),
        _select("status_class", "Last answer", STATUS_CLASSES, get("status_class", ""), "any"),
        text_input("endpoint_id", "Endpoint", get("endpoint_id", ""), "ep_…"),
        text_input("event_id", "Event", get("event_id", ""), "msg_…"),
        text_input("event_type", "Event type", get("event_type", ""), "invoice.paid"),
        text_input("since", "Since (UTC)", get("since", ""), "2026-01-31T12:00Z"),
        text_input("until", "Until (UTC)", get("until", ""), "2026-01-31T13:00Z"),
        text_input("attempts_min", "Attempts ≥", get("attempts_min", ""), "", "number"),
        text_input("attempts_max", "Attempts ≤", get("attempts_max", ""), "", "number"),
        _select("limit", "Per page", PAGE_SIZES, get("limit", PAGE_SIZES[0]), ""),
    ]
    return render(
        '<form method="get" action="$action" class="filters">$fields'
        '<button type="submit">Filter</button> <a href="$action">Clear</a></form>',
        action=place.path("deliveries"),
        fields=join(fields),
    )


def _short(delivery_id: str) -> str:
    # Delivery ids are 56 characters; the tail tells them apart in a list.
    return delivery_id[:4] + "…" + delivery_id[-10:]


def _application_link(place: Place, record: JSON) -> Markup | str:
    """A record's application, linked to its pages; the default one's are the flat pages."""
    owner = place.of(record)
    if owner.app is None:
        return d.application(record)
    return render('<a href="$href">$app</a>', href=owner.home, app=owner.app)


def delivery_rows(place: Place, deliveries: list[JSON]) -> list[list[Markup | str | int]]:
    """One row each, linked within this place; a flat list (every application the key may
    see) also says which application each delivery is of."""
    rows: list[list[Markup | str | int]] = []
    for x in deliveries:
        owner = place.of(x)
        row: list[Markup | str | int] = [
            render(
                '<a href="$href" title="$id">$short</a>',
                href=owner.path("deliveries", x["id"]),
                id=x["id"],
                short=_short(x["id"]),
            ),
            layout.badge(x["status"], STATUS_BADGE[x["status"]]),
            x["attempts"],
            d.delivery_outcome(x),
            x["event_type"],
            render(
                '<a href="$href">$id</a>',
                href=owner.path("endpoints", x["endpoint_id"]),
                id=x["endpoint_id"],
            ),
            d.moment(x["created_at"]),
            d.moment(x["updated_at"]),
        ]
        if place.app is None:
            row.insert(5, _application_link(place, x))
        rows.append(row)
    return rows


def delivery_headers(place: Place) -> list[str]:
    headers = ["Delivery", "Status", "Attempts", "Last", "Event type", "Endpoint"]
    if place.app is None:
        headers.insert(5, "Application")
    return [*headers, "Created", "Updated"]


def _bulk_retry(place: Place, query: dict[str, str], session: Session) -> Markup:
    chosen = {k: query[k] for k in BULK_RETRY_FILTERS if query.get(k)}
    if not chosen or chosen.get("status") in LIVE_STATUSES:
        return Markup("")
    what = chosen.get("status", "failed")
    return layout.post_button(
        place.path("deliveries", "retry"),
        f"Retry every matching {what} delivery",
        session,
        confirm=f"Re-send every {what} delivery these filters match?",
        fields=chosen,
    )


@dataclass(frozen=True)
class Listing:
    """One page of the deliveries a query matches: their table and the link to the next
    page; a query the API refuses (422) lists nothing and ``note`` explains it."""

    body: Markup
    note: str = ""
    error: bool = False


async def listing(api: AdminApi, place: Place, query: dict[str, str], empty: str) -> Listing:
    """The dashboard's history and the portal's messages: ``query`` (the API's filters and
    cursor) on the place's deliveries, ``empty`` said when nothing matches."""
    note, error = "", False
    page: JSON = {"data": [], "next_cursor": None}
    try:
        page = await api.deliveries({"limit": PAGE_SIZES[0], **query})
    except APIError as exc:
        if exc.status != 422:
            raise
        note, error = explain(exc), True
    table = layout.table(delivery_headers(place), delivery_rows(place, page["data"]), empty)
    more = layout.next_page(place.path("deliveries"), query, page["next_cursor"])
    return Listing(join([table, more]), note, error)


@signed_in
async def history(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    query = {
        k: v for k, v in request.query.items() if v and k in (*DELIVERY_FILTERS, "cursor", "limit")
    }
    found = await listing(api, place, query, "No delivery matches these filters.")
    body = join([filter_form(place, query), _bulk_retry(place, query, session), found.body])
    return layout.page(
        "Deliveries",
        body,
        session,
        place=place,
        active="deliveries",
        note=found.note or layout.notice(request),
        error=found.error,
    )


def attempt_log(delivery: JSON) -> Markup:
    """Each attempt of a delivery: its timing as bars, then a row each."""
    log = delivery["attempt_log"]
    if not log:
        return render('<p class="empty">No attempt yet.</p>')
    timing = charts.bars(
        [
            charts.Bar(
                f"#{a['number']} {d.outcome(a['status_code'], a['error'])}",
                a["duration_ms"],
                "ok" if _succeeded(a) else "bad",
                f"attempt {a['number']} at {d.moment(a['started_at'])}: "
                f"{d.duration(a['duration_ms'])}",
            )
            for a in log
        ],
        title="duration of each attempt",
        unit=" ms",
    )
    rows: list[list[Markup | str | int]] = [
        [
            a["number"],
            d.moment(a["started_at"]),
            layout.badge(d.outcome(a["status_code"], a["error"]), "ok" if _succeeded(a) else "bad"),
            d.duration(a["duration_ms"]),
            join(
                [
                    _headers("sent", a["request_headers"]),
                    _headers("received", a["response_headers"]),
                ]
            ),
            _body(a["response_body"]),
        ]
        for a in log
    ]
    table = layout.table(
        ["#", "Started", "Outcome", "Duration", "Headers", "Response body"], rows, ""
    )
    return render(
        "<figure><figcaption>Attempt timing</figcaption>$timing</figure>$table",
        timing=timing,
        table=table,
    )


def waiting_for(delivery: JSON, now: int) -> str | None:
    """What a delivery not yet final waits for, in words true whatever sends it (a worker,
    or in tick mode the next tick): a scheduled one its time, a retry its next attempt's.
    One whose time has come is being sent or is next to be, which the API does not tell
    apart. None once final. Times as every page shows them (describe.moment)."""
    at = delivery["next_attempt_at"]
    if delivery["status"] == "scheduled":
        return f"Scheduled for {d.moment(at)}."
    if delivery["status"] != "pending":
        return None
    if at is not None and parse_iso(at) > now:
        return f"Next attempt at {d.moment(at)}."
    since = f" since {d.moment(at)}" if at is not None else ""
    return f"Due{since}: being sent, or next to be."


def _succeeded(attempt: JSON) -> bool:
    code = attempt["status_code"]
    return code is not None and 200 <= code < 300


def _headers(label: str, headers: dict[str, str]) -> Markup:
    """One attempt's header set, folded away: the outcome and body are what most looks want.
    Names and values as the record holds them (credentials already redacted), escaped."""
    if not headers:
        return render('<p class="empty">none $label</p>', label=label)
    return render(
        "<details><summary>$count $label</summary>$facts</details>",
        count=len(headers),
        label=label,
        facts=facts_list(list(headers.items())),
    )


def _body(text: str) -> Markup:
    if not text:
        return render('<span class="empty">empty</span>')
    if len(text) <= BODY_PREVIEW and "\n" not in text:
        return render("<code>$t</code>", t=text)
    return render(
        "<details><summary>$head…</summary><pre>$t</pre></details>",
        head=text[:BODY_PREVIEW].replace("\n", " "),
        t=text,
    )


@signed_in
async def delivery_page(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    delivery = await api.delivery(request.match_info["delivery_id"])
    status = delivery["status"]
    owner = place.of(delivery)
    facts = [
        ("Status", layout.badge(delivery["status"], STATUS_BADGE[delivery["status"]])),
        ("Event", f"{delivery['event_id']} ({delivery['event_type']})"),
        (
            "Endpoint",
            render(
                '<a href="$href">$id</a>',
                href=owner.path("endpoints", delivery["endpoint_id"]),
                id=delivery["endpoint_id"],
            ),
        ),
        ("Attempts", delivery["attempts"]),
        ("Last outcome", d.delivery_outcome(delivery)),
        ("Next attempt", d.moment(delivery["next_attempt_at"])),
        ("Created", d.moment(delivery["created_at"])),
        ("Updated", d.moment(delivery["updated_at"])),
    ]
    if place.app is None:
        facts.insert(2, ("Application", _application_link(place, delivery)))
    waiting = waiting_for(delivery, now_ms())
    if status == "pending":
        action = render('<p class="pending">$w This page follows it.</p>', w=waiting)
    elif status == "scheduled":
        # Its event's deliver_at: the cancel is the event's (DELETE …/schedule), not a retry.
        action = render('<p class="pending">$w</p>', w=waiting)
    else:
        action = layout.post_button(
            place.path("deliveries", delivery["id"], "retry"), "Retry now", session, css="primary"
        )
    body = join([facts_list(facts), action, render("<h2>Attempts</h2>"), attempt_log(delivery)])
    return layout.page(
        "Delivery",
        body,
        session,
        place=place,
        trail=[("Deliveries", place.path("deliveries"))],
        active="deliveries",
        note=layout.notice(request),
        refresh=REFRESH if status == "pending" or _log_behind(delivery) else None,
    )


def _log_behind(delivery: JSON) -> bool:
    """Its latest state is Redis's, its attempts the log's, which follows a moment later:
    until the log has them all, the page keeps reloading."""
    return len(delivery.get("attempt_log") or []) < int(delivery["attempts"])


async def retry_delivery(request: web.Request, api: AdminApi, place: Place) -> web.StreamResponse:
    """Send the delivery the path names again, then its page, saying so."""
    delivery_id = request.match_info["delivery_id"]
    try:
        await api.retry(delivery_id)
    except APIError as exc:
        # Already pending: it is being sent anyway, which is what the button asked for.
        if exc.status != 409:
            raise
    return redirect(place.path("deliveries", delivery_id) + "?done=retried")


retry = dashboard_action(retry_delivery)


@signed_in
async def bulk_retry(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    form = await read_form(request)
    query = {k: v for k in BULK_RETRY_FILTERS if isinstance(v := form.get(k), str) and v}
    job = await api.bulk_retry(query)
    return redirect(place.path("jobs", job["id"]))


@signed_in
async def job_page(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    job = await api.job(request.match_info["job_id"])
    running = job["state"] == "running"
    progress = render(
        '<progress max="$max" value="$value">$value of $max</progress>',
        max=max(job["matched"], 1),
        value=job["retried"],
    )
    facts = facts_list(
        [
            ("Kind", JOB_KINDS.get(job["kind"], job["kind"])),
            ("State", layout.badge(job["state"], "warn" if running else "ok")),
            ("Found", job["matched"]),
            ("Re-sent", job["retried"]),
            ("Progress", progress),
            ("Started", d.moment(job["created_at"])),
            ("Updated", d.moment(job["updated_at"])),
        ]
    )
    deliveries = place.path("deliveries")
    back = render('<p><a href="$href">Deliveries</a></p>', href=deliveries)
    return layout.page(
        f"Job {job['id']}",
        join([facts, back]),
        session,
        place=place,
        trail=[("Deliveries", deliveries)],
        active="deliveries",
        refresh=REFRESH if running else None,
    )
