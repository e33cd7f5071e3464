"""Endpoints: the overview with health, backlog and charts; one endpoint; its actions
(the form that creates and edits one is endpoint_editor.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.api.body import read_form
from webhook_service.client.errors import APIError
from webhook_service.dashboard import catalog, charts, figures, layout
from webhook_service.dashboard.access import redirect, signed_in
from webhook_service.dashboard.actions import Action, dashboard_action
from webhook_service.dashboard.markup import Markup, join, render, with_query
from webhook_service.dashboard.places import Place
from webhook_service.dashboard.session import CSRF_FIELD, Session
from webhook_service.timeutil import iso, now_ms

PAGE_SIZE = 25
HEALTH_BADGE = {
    "healthy": "ok",
    "degraded": "warn",
    "failing": "bad",
    "disabled": "off",
    "idle": "off",
}
GRACE_CHOICES = (("24 h", 86400), ("1 h", 3600), ("7 days", 604800), ("none", 0))
RECOVER_CHOICES = (("last hour", 3600), ("last day", 86400), ("last 7 days", 7 * 86400))


# A check's state (/readyz): a lagging one (the log behind) still serves, and says so.
_CHECK_BADGE = {"ok": "ok", "lagging": "warn", "failing": "bad"}


def _readiness(ready: JSON) -> Markup:
    checks = [
        render(
            '<li title="$detail">$badge</li>',
            detail=check["detail"],
            badge=layout.badge(name.replace("_", " "), _CHECK_BADGE[check["state"]]),
        )
        for name, check in ready["checks"].items()
    ]
    state = layout.badge(ready["status"], "ok" if ready["status"] == "ready" else "bad")
    return render(
        '<section class="ready"><h2>System $state</h2><ul class="checks">$checks</ul></section>',
        state=state,
        checks=join(checks),
    )


# The columns of endpoint_row.
ENDPOINT_HEADERS = [
    "Endpoint", "URL", "Health", "Last hour", "Delivered", "Success", "p95", "Backlog",
    "Last failure", "",
]  # fmt: skip


def endpoint_row(place: Place, endpoint: JSON, stats: JSON | None) -> list[Markup | str | int]:
    link = render(
        '<a href="$href">$id</a>', href=place.path("endpoints", endpoint["id"]), id=endpoint["id"]
    )
    history = render(
        '<a href="$href">deliveries</a>',
        href=with_query(place.path("deliveries"), {"endpoint_id": endpoint["id"]}),
    )
    if stats is None:
        # No deliveries:read scope: the endpoint without its figures.
        return [
            link,
            layout.wrap(endpoint["url"]),
            layout.badge(d.endpoint_state(endpoint)),
            *[""] * 6,
            history,
        ]
    hour = stats["last_hour"]
    health = d.health(endpoint, stats)
    spark = charts.sparkline(
        figures.attempts([stats["per_minute"]]),
        title=f"attempts per minute, last hour: {hour['attempts']}",
    )
    return [
        link,
        layout.wrap(endpoint["url"]),
        layout.badge(health, HEALTH_BADGE[health]),
        spark,
        hour["deliveries"],
        d.percent(hour["success_rate"]),
        d.duration(hour["latency_ms"]["p95"]),
        stats["backlog"],
        d.last_failure(stats),
        history,
    ]


async def stats_or_none(api: AdminApi, endpoints: list[JSON]) -> list[JSON | None]:
    """Stats need deliveries:read; a key with only endpoints:read still sees the list."""
    try:
        return list(await api.stats_for(endpoints))
    except APIError as exc:
        if exc.status != 403:
            raise
        return [None] * len(endpoints)


def activity(minutes: list[figures.Minutes]) -> list[Markup]:
    """Deliveries and attempts per minute, summed over the endpoints given."""
    labels = figures.minute_labels(minutes[0])
    outcome, tried = figures.outcomes(minutes), figures.attempts(minutes)
    return [
        charts.figure(
            "Deliveries finished per minute",
            charts.stacked_bars(outcome, labels, title="deliveries finished per minute"),
            outcome,
        ),
        charts.figure(
            "Attempts per minute",
            charts.stacked_bars(tried, labels, title="attempts per minute"),
            tried,
        ),
    ]


def charts_section(figures_shown: list[Markup]) -> Markup:
    return render('<section class="charts">$f</section>', f=join(figures_shown))


def _application_facts(place: Place) -> Markup:
    """The application's own settings, above its endpoints."""
    app = place.application
    if app is None:
        return Markup("")
    return facts_list(
        [
            ("Name", app["name"]),
            ("Id", app["id"]),
            ("Uid", app["uid"] or d.NOTHING),
            ("Metadata", d.metadata(app)),
            ("Rate limit", d.rate(app["rate_limit"])),
            ("Created", d.moment(app["created_at"])),
        ]
    )


def _no_endpoints(place: Place) -> str:
    if place.app is None:
        return (
            "No endpoints yet: create one with New endpoint, POST /v1/endpoints or "
            "`webhook-service endpoints create`."
        )
    return (
        "No endpoints yet: create one with New endpoint, "
        f"POST /v1/applications/{place.app}/endpoints or "
        f"`webhook-service endpoints create --app {place.app}`."
    )


def _new_link(place: Place) -> Markup:
    return render(
        '<p><a class="button primary" href="$href">New endpoint</a></p>',
        href=place.path("endpoints", "new"),
    )


@dataclass(frozen=True)
class EndpointList:
    """A page of a place's endpoints: their table with each one's health and figures, the
    link to the next page below it, and the charts of their activity (none without
    figures)."""

    table: Markup
    charts: Markup


async def endpoint_list(
    request: web.Request, api: AdminApi, place: Place, empty: str
) -> EndpointList:
    """The dashboard's endpoints and the portal's: the page the request's cursor names,
    ``empty`` said when there are none."""
    listed = await api.endpoints(PAGE_SIZE, request.query.get("cursor") or None)
    endpoints: list[JSON] = listed["data"]
    stats = await stats_or_none(api, endpoints)
    rows = [endpoint_row(place, e, s) for e, s in zip(endpoints, stats, strict=True)]
    table = layout.table(ENDPOINT_HEADERS, rows, empty)
    more = layout.next_page(place.home, {}, listed["next_cursor"])
    minutes = [s["per_minute"] for s in stats if s is not None]
    shown = charts_section(activity(minutes)) if minutes else Markup("")
    return EndpointList(join([table, more]), shown)


@signed_in
async def overview(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    found = await endpoint_list(request, api, place, _no_endpoints(place))
    ready = await api.readiness()
    body = join(
        [_readiness(ready), _application_facts(place), found.charts, _new_link(place), found.table]
    )
    return layout.page(
        "Endpoints",
        body,
        session,
        place=place,
        active="endpoints",
        note=layout.notice(request),
    )


def toggle_button(here: str, endpoint: JSON, session: layout.FormSession) -> Markup:
    """Enable a disabled endpoint, or disable it (``here``: the endpoint's page)."""
    if endpoint["disabled"]:
        return layout.post_button(here + "/enable", "Enable", session, css="primary")
    return layout.post_button(
        here + "/disable",
        "Disable",
        session,
        css="danger",
        confirm="Stop sending to this endpoint?",
    )


def _options(choices: tuple[tuple[str, int], ...]) -> Markup:
    return join(
        render('<option value="$v">$label</option>', v=v, label=label) for label, v in choices
    )


def rotate_form(here: str, session: layout.FormSession) -> Markup:
    return render(
        '<form method="post" action="$action" class="inline" data-confirm="$confirm">'
        '<input type="hidden" name="$field" value="$csrf">'
        '<label>old key signs for <select name="grace_period_seconds">$grace</select></label>'
        '<button type="submit">Rotate secret</button></form>',
        action=here + "/rotate-secret",
        field=CSRF_FIELD,
        csrf=session.csrf,
        grace=_options(GRACE_CHOICES),
        confirm="Make a new signing key? Receivers need it before the old one stops signing.",
    )


def recover_form(here: str, session: layout.FormSession) -> Markup:
    return render(
        '<form method="post" action="$action" class="inline">'
        '<input type="hidden" name="$field" value="$csrf">'
        '<label>re-send failed and disabled deliveries of the <select name="window">$window'
        '</select></label><button type="submit">Recover</button></form>',
        action=here + "/recover",
        field=CSRF_FIELD,
        csrf=session.csrf,
        window=_options(RECOVER_CHOICES),
    )


def example_form(
    here: str, endpoint: JSON, types: list[JSON], session: layout.FormSession
) -> Markup:
    """Send one catalog example of a type this endpoint takes, to it alone (``types``: the
    catalog, catalog.event_types); none when the catalog has no such type."""
    takes = endpoint.get("event_types")
    offered = [t for t in types if takes is None or t["name"] in takes]
    if not offered:
        return Markup("")
    options = join(render('<option value="$n">$n</option>', n=t["name"]) for t in offered)
    return render(
        '<form method="post" action="$action" class="inline">'
        '<input type="hidden" name="$field" value="$csrf">'
        '<label>Send an example <select name="event_type">$options</select></label>'
        '<button type="submit">Send example</button></form>',
        action=here + "/send-example",
        field=CSRF_FIELD,
        csrf=session.csrf,
        options=options,
    )


def _actions(place: Place, endpoint: JSON, types: list[JSON], session: Session) -> Markup:
    here = place.path("endpoints", endpoint["id"])
    return render(
        '<section class="actions"><a class="button" href="$edit">Edit</a>'
        "$toggle$example$rotate$recover</section>",
        edit=here + "/edit",
        toggle=toggle_button(here, endpoint, session),
        example=example_form(here, endpoint, types, session),
        rotate=rotate_form(here, session),
        recover=recover_form(here, session),
    )


def endpoint_charts(stats: JSON) -> Markup:
    minutes = stats["per_minute"]
    speed = figures.latency(minutes)
    latency = charts.line_chart(
        speed, figures.minute_labels(minutes), title="attempt latency", unit=" ms"
    )
    return charts_section(
        [*activity([minutes]), charts.figure("Attempt latency per minute", latency, speed)]
    )


def endpoint_facts(endpoint: JSON, stats: JSON) -> Markup:
    health = d.health(endpoint, stats)
    facts = [
        ("URL", endpoint["url"]),
        ("Health", layout.badge(health, HEALTH_BADGE[health])),
        ("State", d.endpoint_state(endpoint)),
        ("Event types", d.event_types(endpoint)),
        ("Channels", d.channels(endpoint)),
        ("Filter", d.payload_filter(endpoint)),
        ("Description", endpoint["description"] or d.NOTHING),
        ("Signature", endpoint["signature"]),
        ("Retry schedule", d.retry_schedule(endpoint)),
        ("Request timeout", d.request_timeout(endpoint)),
        ("Ordering", d.ordering(endpoint)),
        ("Backlog", f"{stats['backlog']} pending"),
        ("Last success", d.moment(stats["last_success_at"])),
        ("Last failure", d.last_failure(stats)),
        ("Created", d.moment(endpoint["created_at"])),
    ]
    return facts_list(facts)


def _operator_facts(endpoint: JSON) -> Markup:
    """What the dashboard's form sets past the portal's: shown on the dashboard alone."""
    return facts_list(
        [
            ("Rate limit", d.rate(endpoint.get("rate_limit"))),
            ("Headers", d.endpoint_headers(endpoint)),
        ]
    )


def facts_list(facts: list[tuple[str, Any]]) -> Markup:
    items = join(render("<dt>$k</dt><dd>$v</dd>", k=k, v=v) for k, v in facts)
    return render('<dl class="facts">$items</dl>', items=items)


@signed_in
async def endpoint_page(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    endpoint_id = request.match_info["endpoint_id"]
    endpoint = await api.endpoint(endpoint_id)
    stats = await api.stats(endpoint_id)
    types = await catalog.event_types_or_none(api)
    deliveries = place.path("deliveries")
    failed = with_query(deliveries, {"endpoint_id": endpoint_id, "status": "failed"})
    every = with_query(deliveries, {"endpoint_id": endpoint_id})
    links = render(
        '<p><a href="$every">All its deliveries</a> · '
        '<a href="$failed">Its failed deliveries</a></p>',
        every=every,
        failed=failed,
    )
    body = join(
        [
            endpoint_facts(endpoint, stats),
            _operator_facts(endpoint),
            _actions(place, endpoint, types, session),
            links,
            endpoint_charts(stats),
            render("<h2>Last hour and day</h2>"),
            layout.table(list(d.WINDOW_TITLES), list(d.windows(stats)), ""),
        ]
    )
    return layout.page(
        endpoint["id"],
        body,
        session,
        place=place,
        trail=[("Endpoints", place.home)],
        active="endpoints",
        note=layout.notice(request),
    )


def switch_endpoint(enabled: bool) -> Action:
    """Enable (or disable) the endpoint the path names, then its page, saying which."""
    done = "enabled" if enabled else "disabled"

    async def action(request: web.Request, api: AdminApi, place: Place) -> web.StreamResponse:
        endpoint = await api.set_enabled(request.match_info["endpoint_id"], enabled)
        return redirect(place.path("endpoints", endpoint["id"]) + "?done=" + done)

    return action


enable = dashboard_action(switch_endpoint(True))
disable = dashboard_action(switch_endpoint(False))


def secret_shown(place: Place, record: JSON, new: str = "") -> Markup:
    """An endpoint's signing secret (an ed25519 one's public key) from the answer to a
    POST that made it: shown on that answer only, never put in a URL, for the secret is as
    good as the right to sign its webhooks."""
    under = "/v1" if place.app is None else f"/v1/applications/{place.app}"
    return render(
        "<p>The ${new}signing $kind, shown this once (also at GET $under/endpoints/{id}/secret):"
        '</p><pre class="secret">$shown</pre>',
        new=new,
        under=under,
        kind="secret" if record.get("secret") else "public key",
        shown=record.get("secret") or record.get("public_key") or d.NOTHING,
    )


async def start_example(request: web.Request, api: AdminApi, place: Place) -> web.StreamResponse:
    """Send the endpoint the path names the catalog's example of the type the form chose,
    then the page of its delivery, which follows it until it settles."""
    form = await read_form(request)
    chosen = form.get("event_type", "")
    sent = await api.send_example(request.match_info["endpoint_id"], chosen)
    return redirect(place.path("deliveries", sent["delivery_id"]) + "?done=example")


send_example = dashboard_action(start_example)


def choice(raw: object, choices: tuple[tuple[str, int], ...]) -> int:
    """One of the form's offered values; anything else is the first (the default)."""
    allowed = {str(v): v for _, v in choices}
    return allowed.get(raw if isinstance(raw, str) else "", choices[0][1])


@signed_in
async def rotate(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    form = await read_form(request)
    grace = choice(form.get("grace_period_seconds"), GRACE_CHOICES)
    rotated = await api.rotate_secret(request.match_info["endpoint_id"], grace)
    until = [d.moment(p["expires_at"]) for p in rotated["previous_keys"]]
    back = place.path("endpoints", rotated["id"])
    body = render(
        '$shown<p>Older keys still signing until: $until</p><p><a href="$back">Back to the '
        "endpoint</a></p>",
        shown=secret_shown(place, rotated, "new "),
        until=", ".join(until) or "none",
        back=back,
    )
    return layout.page(
        "Secret rotated",
        body,
        session,
        place=place,
        trail=[("Endpoints", place.home), (rotated["id"], back)],
        active="endpoints",
    )


async def start_recovery(request: web.Request, api: AdminApi, place: Place) -> web.StreamResponse:
    """Re-send the endpoint's failed and disabled deliveries of the window the form chose,
    then the page of that job."""
    form = await read_form(request)
    seconds = choice(form.get("window"), RECOVER_CHOICES)
    job = await api.recover(request.match_info["endpoint_id"], iso(now_ms() - seconds * 1000), None)
    return redirect(place.path("jobs", job["id"]))


recover = dashboard_action(start_recovery)
