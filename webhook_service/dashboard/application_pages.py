"""Applications: every one the signed-in key may see (a bound key: its own), each with its
health and volume, summed from its endpoints' stats (admin/application_health.py, which
the command line's ``applications list`` shares): one page of ``PAGE_SIZE`` applications
of ``n`` endpoints each costs ``PAGE_SIZE * (1 + n)`` requests to this very process.

And an application's subscriber portal links (issue 17): made there, shown once, and all
revoked at once, through ``/v1/applications/{app}/portal-access`` as the signed-in key.
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin import describe as d
from webhook_service.admin.api import JSON, AdminApi
from webhook_service.admin.application_health import (
    NO_ENDPOINTS,
    Summary,
    endpoint_cells,
    summaries,
    volume_cells,
)
from webhook_service.api.body import read_form
from webhook_service.dashboard import charts, figures, layout
from webhook_service.dashboard.access import redirect, signed_in
from webhook_service.dashboard.endpoint_pages import (
    HEALTH_BADGE,
    activity,
    charts_section,
    choice,
    facts_list,
)
from webhook_service.dashboard.markup import Markup, join, path, render
from webhook_service.dashboard.places import APPLICATIONS, Place, within
from webhook_service.dashboard.session import CSRF_FIELD, Session
from webhook_service.portal_access import DEFAULT_CAPABILITIES, Capability

PAGE_SIZE = 20
BADGES = {**HEALTH_BADGE, NO_ENDPOINTS: "off"}


def application_row(app: JSON, summary: Summary) -> list[Markup | str | int]:
    place = within(app)
    link = render('<a href="$href" title="$id">$name</a>', href=place.home, id=app["id"],
                  name=app["name"])  # fmt: skip
    health = (
        layout.badge(summary.health, BADGES[summary.health])
        if summary.health is not None
        else d.NOTHING
    )
    spark: Markup | str = d.NOTHING
    if summary.minutes:
        spark = charts.sparkline(
            figures.attempts(summary.minutes), title="attempts per minute, last hour"
        )
    deliveries = render('<a href="$href">deliveries</a>', href=place.path("deliveries"))
    return [
        link,
        render("<code>$uid</code>", uid=app["uid"]) if app["uid"] else d.NOTHING,
        health,
        *endpoint_cells(summary),
        spark,
        *volume_cells(summary),
        deliveries,
    ]


HEADERS = [
    "Application", "Uid", "Health", "Endpoints", "Disabled", "Failing", "Last hour",
    "Hour's deliveries", "Hour's success", "Day's deliveries", "Day's success", "Backlog", "",
]  # fmt: skip


@signed_in
async def applications(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    listed = await api.applications(PAGE_SIZE, request.query.get("cursor") or None)
    found = await summaries(api, listed["data"])
    shown = [(a, s) for a, s in zip(listed["data"], found, strict=True) if s is not None]
    table = layout.table(
        HEADERS,
        [application_row(a, s) for a, s in shown],
        "No applications yet: create one with POST /v1/applications or "
        "`webhook-service applications create NAME`.",
    )
    more = layout.next_page(path(APPLICATIONS), {}, listed["next_cursor"])
    minutes = [m for _, s in shown for m in s.minutes]
    activity_shown = charts_section(activity(minutes)) if minutes else Markup("")
    return layout.page(
        "Applications",
        join([activity_shown, table, more]),
        session,
        place=place,
        active="applications",
    )


# The portal links page of a place: its application's (the flat one: the default
# application's, or a bound key's own, as the flat API route acts on).
PORTAL_LINKS = "portal-links"
# The API's default first: the form's default is the API's.
EXPIRY_CHOICES = (("1 hour", 3600), ("1 day", 86400), ("7 days", 604800), ("10 minutes", 600))
CAPABILITY_WORDS = {
    Capability.VIEW: "see its endpoints, their health and messages (always held)",
    Capability.MANAGE_ENDPOINTS: "add, change, disable and delete endpoints",
    Capability.VIEW_SECRETS: "reveal signing secrets",
    Capability.ROTATE_SECRETS: "rotate signing secrets",
    Capability.RETRY: "retry deliveries and recover a time window",
    Capability.SEND_EXAMPLES: "send example events from the catalog",
}
_REVOKED = "Every portal link and portal session of this application has ended."


def _capability_box(capability: Capability) -> Markup:
    # View is held by every link (portal_access.granted): shown ticked, not a choice.
    fixed = capability is Capability.VIEW
    return render(
        '<label><input type="checkbox" name="capabilities" value="$value"$state> '
        "<code>$value</code> $words</label>",
        value=capability.value,
        state=Markup(
            " checked disabled"
            if fixed
            else " checked"
            if capability in DEFAULT_CAPABILITIES
            else ""
        ),
        words=CAPABILITY_WORDS[capability],
    )


def portal_link_form(place: Place, session: Session) -> Markup:
    """Make a link: what it lets its holder do, how long it opens the portal, read-only."""
    expiry = join(
        render('<option value="$v">$label</option>', v=v, label=label)
        for label, v in EXPIRY_CHOICES
    )
    return render(
        '<form method="post" action="$action" class="portal-link">'
        '<input type="hidden" name="$field" value="$csrf">'
        "<fieldset><legend>What its holder may do</legend>$boxes</fieldset>"
        '<p><label>Opens the portal for <select name="expires_in">$expiry</select></label></p>'
        '<p><label><input type="checkbox" name="read_only" value="1"> read-only: view alone, '
        "whatever is ticked above</label></p>"
        '<button type="submit" class="primary">Make a portal link</button></form>',
        action=place.path(PORTAL_LINKS),
        field=CSRF_FIELD,
        csrf=session.csrf,
        boxes=join(_capability_box(c) for c in Capability),
        expiry=expiry,
    )


def _portal_page(place: Place, session: Session, body: Markup, note: str = "") -> web.Response:
    return layout.page(
        "Subscriber portal", body, session, place=place, active=PORTAL_LINKS, note=note
    )


@signed_in
async def portal_links(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    if not await api.may_make_portal_links():
        return _portal_page(
            place,
            session,
            render(
                "<p>This key may not make portal links for this application: that needs "
                "the <code>applications:write</code> scope.</p>"
            ),
        )
    intro = render(
        "<p>A portal link opens this application's subscriber portal, where the people who "
        "receive its webhooks manage their own endpoints and see their deliveries. Whoever "
        "holds the link gets in until it expires; send it to them alone.</p>"
    )
    revoke = render(
        "<h2>Revoke</h2><p>Ends every link made so far, and every portal session they "
        "opened, at once.</p>$button",
        button=layout.post_button(
            place.path(PORTAL_LINKS, "revoke"),
            "Revoke every link",
            session,
            css="danger",
            confirm="End every portal link and portal session of this application now?",
        ),
    )
    note = _REVOKED if request.query.get("done") == "revoked" else ""
    body = join([intro, portal_link_form(place, session), revoke])
    return _portal_page(place, session, body, note)


@signed_in
async def make_portal_link(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    form = await read_form(request)
    made = await api.portal_link(
        choice(form.get("expires_in"), EXPIRY_CHOICES),
        form.getall("capabilities", []),
        form.get("read_only") == "1",
    )
    # Shown on this answer only, never put in a URL or a redirect: it is a credential.
    body = join(
        [
            render(
                "<p>The link, shown this once: copy it and send it to the subscriber.</p>"
                '<p><input type="text" readonly class="secret" size="100" value="$url" '
                'aria-label="Portal link"></p>',
                url=made["url"],
            ),
            facts_list(
                [
                    ("Expires", d.moment(made["expires_at"])),
                    ("Capabilities", ", ".join(made["capabilities"])),
                ]
            ),
            render('<p><a href="$back">Back</a></p>', back=place.path(PORTAL_LINKS)),
        ]
    )
    return _portal_page(place, session, body)


@signed_in
async def revoke_portal_links(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    await api.revoke_portal_links()
    return redirect(place.path(PORTAL_LINKS) + "?done=revoked")
