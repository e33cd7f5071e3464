"""The page around every dashboard view, its security headers, and its small parts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from aiohttp import web

from webhook_service.dashboard.markup import Markup, join, path, render, with_query
from webhook_service.dashboard.places import APPLICATIONS, FLAT, Crumb, Place
from webhook_service.dashboard.session import CSRF_FIELD, Session

# Scripts and styles only from our own two files; nothing inline, nothing from elsewhere,
# no framing, forms only back to us.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # Not no-referrer: under it browsers send "Origin: null" with our own forms, and the
    # origin check (session.same_origin) would refuse them.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

# What a redirect after an action says on the page it lands on (?done=<code>).
NOTICES = {
    "retried": "Retry requested: its next attempt is due now.",
    "enabled": "Endpoint enabled: new events reach it again.",
    "disabled": "Endpoint disabled: its events are kept as disabled deliveries.",
    "saved": "Endpoint saved: the changes apply from its next event and attempt.",
    "unchanged": "Nothing was changed: the form was as the endpoint is.",
    "example": "Example sent to this endpoint alone: this page follows its delivery.",
    "signed-out": "Signed out.",
}

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title$where · webhook-service</title>
<link rel="stylesheet" href="/dashboard/static/dashboard.css">
<script src="/dashboard/static/dashboard.js" defer></script>
</head><body data-refresh="$refresh">
<header><a class="brand" href="/dashboard">webhook-service</a>$application
<nav aria-label="Main">$nav</nav>$account</header>
<main>$crumbs$notice<h1>$title</h1>$body</main>
</body></html>
"""


def _nav(place: Place, active: str) -> Markup:
    """The same places everywhere; within an application, its endpoints, its events, its
    deliveries and its portal links. The catalog is every application's."""
    items = (
        ("applications", "Applications", path(APPLICATIONS)),
        ("endpoints", "Endpoints", place.home),
        ("events", "Events", place.path("events")),
        ("deliveries", "Deliveries", place.path("deliveries")),
        ("portal-links", "Portal links", place.path("portal-links")),
        ("event-types", "Event types", path("event-types")),
    )
    return nav_links(items, active)


def nav_links(items: Sequence[tuple[str, str, str]], active: str) -> Markup:
    """A navigation's links, each ``(name, label, href)``; the ``active`` one marked."""
    return join(
        render(
            '<a href="$href" class="$css">$label</a>',
            href=href,
            label=label,
            css="active" if name == active else "",
        )
        for name, label, href in items
    )


def _application(place: Place) -> Markup:
    """The application a page is within, named in the header of each of its pages."""
    if place.app is None:
        return Markup("")
    record = place.application or {}
    return render(
        '<span class="application">Application <a href="$href" title="$id">$name</a>$uid</span>',
        href=place.home,
        id=record.get("id", place.app),
        name=place.label,
        uid=render(' <code class="uid">$u</code>', u=record["uid"])
        if record.get("uid")
        else Markup(""),
    )


def breadcrumbs(trail: Sequence[Crumb], title: str) -> Markup:
    """The pages above this one, each a link, then this one; none on a top page."""
    if not trail:
        return Markup("")
    above = [render('<li><a href="$href">$label</a></li>', href=h, label=lb) for lb, h in trail]
    return render(
        '<nav aria-label="Breadcrumb" class="crumbs"><ol>$above'
        '<li aria-current="page">$title</li></ol></nav>',
        above=join(above),
        title=title,
    )


class FormSession(Protocol):
    """What a form needs of a session: the token it carries (a dashboard's or a portal's
    session, whose forms both send it as ``CSRF_FIELD``)."""

    @property
    def csrf(self) -> str: ...


def post_button(
    action: str,
    label: str,
    session: FormSession,
    *,
    css: str = "",
    confirm: str = "",
    fields: dict[str, str] | None = None,
) -> Markup:
    """A form that POSTs to ``action`` with the session's CSRF token and ``fields``."""
    hidden = [
        render('<input type="hidden" name="$n" value="$v">', n=name, v=value)
        for name, value in {CSRF_FIELD: session.csrf, **(fields or {})}.items()
    ]
    return render(
        '<form method="post" action="$action" class="inline" data-confirm="$confirm">$hidden'
        '<button type="submit" class="$css">$label</button></form>',
        action=action,
        confirm=confirm,
        hidden=join(hidden),
        css=css,
        label=label,
    )


def badge(text: str, kind: str | None = None) -> Markup:
    return render('<span class="badge $kind">$text</span>', kind=kind or text, text=text)


def wrap(text: str) -> Markup:
    """Text a table cell may break anywhere (URLs), where other cells never wrap."""
    return render('<span class="wrap">$text</span>', text=text)


def notice(request: web.Request) -> str:
    return NOTICES.get(request.query.get("done", ""), "")


def notice_line(note: str, error: bool) -> Markup:
    """``note`` as the one-line message above a page's title (none without one)."""
    if not note:
        return Markup("")
    return render(
        '<p class="notice $kind" role="status">$text</p>', text=note, kind="error" if error else ""
    )


def next_page(url: str, query: dict[str, str], cursor: object) -> Markup:
    """The link to a list's next page: ``url`` with ``query`` and the API's ``cursor``;
    none on the last page."""
    if not cursor:
        return Markup("")
    return render(
        '<p><a href="$href">Next page</a></p>',
        href=with_query(url, {**query, "cursor": str(cursor)}),
    )


def page(
    title: str,
    body: Markup,
    session: Session | None,
    *,
    place: Place = FLAT,
    trail: Sequence[Crumb] = (),
    active: str = "",
    note: str = "",
    refresh: int | None = None,
    status: int = 200,
    error: bool = False,
) -> web.Response:
    """A whole HTML page of ``place``; ``trail``: the pages between the place's own
    crumbs and this one, ``refresh`` seconds: the page reloads itself (something is under
    way), ``note``: a one-line message above the title."""
    signed = session is not None
    account = (
        post_button(path("logout"), "Sign out", session, css="link") if session else Markup("")
    )
    html = render(
        _PAGE,
        title=title,
        where=f" · {place.label}" if place.app is not None else "",
        application=_application(place) if signed else Markup(""),
        body=body,
        nav=_nav(place, active) if signed else Markup(""),
        account=account,
        crumbs=breadcrumbs([*place.crumbs, *trail], title) if signed else Markup(""),
        notice=notice_line(note, error),
        refresh="" if refresh is None else refresh,
    )
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


def error_page(status: int, title: str, detail: str, session: Session | None) -> web.Response:
    body = render(
        '<p class="detail">$detail</p><p><a href="/dashboard">Back to the dashboard</a></p>',
        detail=detail,
    )
    return page(title, body, session, status=status)


def apply_security_headers(response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


def table(headers: list[str], rows: list[list[Markup | str | int]], empty: str) -> Markup:
    if not rows:
        return render('<p class="empty">$text</p>', text=empty)
    head = join(render("<th>$h</th>", h=h) for h in headers)
    body = join(
        render("<tr>$cells</tr>", cells=join(render("<td>$c</td>", c=c) for c in row))
        for row in rows
    )
    return render(
        "<table><thead><tr>$head</tr></thead><tbody>$body</tbody></table>", head=head, body=body
    )
