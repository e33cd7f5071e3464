"""Messages: every delivery to the subscriber's endpoints, one delivery with the request we
sent and each attempt's answer, a retry, and a recovery's progress.

A delivery still under way is followed live: its attempts are a fragment of the page
(``…/attempts``) that static/portal.js fetches again each second until it settles, so a
person who just sent an example sees its attempt arrive without reloading.
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.dashboard import layout as dashboard_layout
from webhook_service.dashboard.delivery_pages import (
    JOB_KINDS,
    STATUS_BADGE,
    STATUSES,
    attempt_log,
    listing,
    retry_delivery,
    waiting_for,
)
from webhook_service.dashboard.endpoint_pages import facts_list
from webhook_service.dashboard.markup import Markup, join, render
from webhook_service.portal import layout
from webhook_service.portal.catalog import pretty
from webhook_service.portal.layout import Brand
from webhook_service.portal.place import path
from webhook_service.portal.session import PortalSession
from webhook_service.portal.views import portal_action, portal_page
from webhook_service.portal_access import Capability
from webhook_service.store.states import LIVE_STATUSES
from webhook_service.timeutil import now_ms

# The filters a subscriber needs: by endpoint and by outcome (the API has more).
FILTERS = ("endpoint_id", "status", "event_type")
# A running job's page reloads itself this often (seconds).
REFRESH = 1


def _filters(query: dict[str, str]) -> Markup:
    statuses = join(
        render('<option value="$v"$sel>$v</option>', v=s,
               sel=Markup(" selected") if query.get("status") == s else Markup(""))
        for s in STATUSES
    )  # fmt: skip
    return render(
        '<form method="get" action="$action" class="filters">'
        '<label>Endpoint <input type="text" name="endpoint_id" value="$endpoint" '
        'placeholder="ep_…"></label>'
        '<label>Event type <input type="text" name="event_type" value="$type"></label>'
        '<label>Status <select name="status"><option value="">any</option>$statuses</select>'
        '</label><button type="submit">Filter</button> <a href="$action">Clear</a></form>',
        action=path("deliveries"),
        endpoint=query.get("endpoint_id", ""),
        type=query.get("event_type", ""),
        statuses=statuses,
    )


@portal_page
async def history(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    query = {k: v for k, v in request.query.items() if v and k in (*FILTERS, "cursor")}
    found = await listing(api, brand.place, query, "No message matches.")
    return layout.page(
        "Messages",
        join([_filters(query), found.body]),
        session,
        brand,
        active="messages",
        note=found.note or layout.notice(request),
        error=found.error,
    )


def _settled(delivery: JSON) -> bool:
    """Done changing: not pending, and the log holds every attempt its state counts."""
    logged = len(delivery.get("attempt_log") or [])
    return delivery["status"] != "pending" and logged >= int(delivery["attempts"])


def attempts_section(delivery: JSON, session: PortalSession) -> Markup:
    """The live part of a delivery's page: its state, the retry its session may ask for
    once it is no longer pending, and each attempt with what we sent and what came back.
    Until it settles it names the fragment URL that replaces it."""
    follow = "" if _settled(delivery) else path("deliveries", delivery["id"], "attempts")
    state = facts_list(
        [
            (
                "Status",
                dashboard_layout.badge(delivery["status"], STATUS_BADGE[delivery["status"]]),
            ),
            ("Attempts", delivery["attempts"]),
            ("Last outcome", d.delivery_outcome(delivery)),
            ("Next attempt", d.moment(delivery["next_attempt_at"])),
        ]
    )
    # A retry waits for its time, a scheduled one for its own; a final one whose attempts
    # the log has yet to show is only being recorded.
    words = waiting_for(delivery, now_ms())
    if follow:
        words = (
            f"{words or 'Its last attempt is being recorded.'} This part of the page follows it."
        )
    waiting = render('<p class="pending">$w</p>', w=words) if words else Markup("")
    retry = Markup("")
    if Capability.RETRY in session.capabilities and delivery["status"] not in LIVE_STATUSES:
        retry = dashboard_layout.post_button(
            path("deliveries", delivery["id"], "retry"), "Retry now", session, css="primary"
        )
    return render(
        '<section id="attempts" data-follow="$follow" aria-live="polite">$state$waiting$retry'
        "<h2>Attempts</h2>$log</section>",
        follow=follow,
        state=state,
        waiting=waiting,
        retry=retry,
        log=attempt_log(delivery),
    )


def sent_body(event: JSON) -> Markup:
    """The request body of every attempt: the event as we POST it."""
    if event.get("data") is None:
        return render('<p class="empty">The event\'s payload has been deleted.</p>')
    body = {"type": event["type"], "timestamp": event["timestamp"], "data": event["data"]}
    return render("<pre>$b</pre>", b=pretty(body))


@portal_page
async def delivery_page(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    delivery = await api.delivery(request.match_info["delivery_id"])
    event = await api.event(delivery["event_id"])
    endpoint_link = render(
        '<a href="$h">$id</a>',
        h=path("endpoints", delivery["endpoint_id"]),
        id=delivery["endpoint_id"],
    )
    facts = facts_list(
        [
            ("Message", f"{delivery['event_id']} ({delivery['event_type']})"),
            ("Endpoint", endpoint_link),
            ("Created", d.moment(delivery["created_at"])),
        ]
    )
    body = join(
        [
            facts,
            attempts_section(delivery, session),
            render(
                "<h2>What we sent</h2><p>Each attempt POSTs this JSON body (shown indented "
                "here), with the headers each attempt lists under “sent”: "
                "<code>webhook-id</code>, <code>webhook-timestamp</code> and "
                "<code>webhook-signature</code> among them.</p>"
            ),
            sent_body(event),
        ]
    )
    return layout.page(
        "Message",
        body,
        session,
        brand,
        active="messages",
        trail=[("Messages", path("deliveries"))],
        note=layout.notice(request),
    )


@portal_page
async def attempts_fragment(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    delivery = await api.delivery(request.match_info["delivery_id"])
    response = web.Response(
        text=attempts_section(delivery, session), content_type="text/html", charset="utf-8"
    )
    layout.apply_security_headers(response, brand)
    return response


retry = portal_action(retry_delivery)


@portal_page
async def job_page(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    job = await api.job(request.match_info["job_id"])
    running = job["state"] == "running"
    facts = facts_list(
        [
            ("Kind", JOB_KINDS.get(job["kind"], job["kind"])),
            ("State", dashboard_layout.badge(job["state"], "warn" if running else "ok")),
            ("Found", job["matched"]),
            ("Sent again", job["retried"]),
            ("Started", d.moment(job["created_at"])),
        ]
    )
    back = render('<p><a href="$h">Messages</a></p>', h=path("deliveries"))
    return layout.page(
        "Recovery",
        join([facts, back]),
        session,
        brand,
        active="messages",
        trail=[("Messages", path("deliveries"))],
        refresh=REFRESH if running else None,
    )
