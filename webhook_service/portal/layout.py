"""The page around every portal view: the application's branding, the portal's own
security headers, and the navigation a subscriber needs.

The parts inside a page (tables, badges, charts, buttons) are the dashboard's
(dashboard/layout.py, charts.py); this module only frames them for one application.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from webhook_service.admin.api import JSON
from webhook_service.dashboard.layout import (
    SECURITY_HEADERS,
    breadcrumbs,
    nav_links,
    notice_line,
    post_button,
)
from webhook_service.dashboard.markup import Markup, render
from webhook_service.portal.place import PREFIX, PortalPlace, path
from webhook_service.portal.session import PortalSession, frame_ancestors

# What a redirect after an action says on the page it lands on (?done=<code>).
NOTICES = {
    "created": "Endpoint added. Events of its types are sent to it from now on.",
    "saved": "Changes saved.",
    "deleted": "Endpoint deleted: nothing more is sent to it.",
    "enabled": "Endpoint enabled: new events reach it again.",
    "disabled": "Endpoint disabled: its events are kept, and not sent, until you enable it.",
    "retried": "Retry requested: its next attempt is due now.",
    "example": "Example sent. Its attempt shows below as soon as your endpoint answers.",
}

_NAV = (
    ("endpoints", "Endpoints", path()),
    ("messages", "Messages", path("deliveries")),
    ("event-types", "Event types", path("event-types")),
    ("verify", "Verify signatures", path("verify")),
)

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title · $name</title>
<link rel="stylesheet" href="/dashboard/static/dashboard.css">
<link rel="stylesheet" href="/portal/static/portal.css">$style
<script src="/dashboard/static/dashboard.js" defer></script>
<script src="/portal/static/portal.js" defer></script>
</head><body class="portal" data-refresh="$refresh">
<header>$logo<a class="brand" href="/portal">$name</a>
<nav aria-label="Main">$nav</nav>$account</header>
<main>$crumbs$notice<h1>$title</h1>$body</main>
</body></html>
"""


@dataclass(frozen=True)
class Brand:
    """One application's look in its portal: the operator's name, logo and colour for it
    (its ``portal_*`` fields), and where it may be framed."""

    application: JSON

    @property
    def name(self) -> str:
        return str(self.application.get("portal_name") or self.application["name"])

    @property
    def logo(self) -> str | None:
        url = self.application.get("portal_logo_url")
        return str(url) if url and urlsplit(str(url)).scheme == "https" else None

    @property
    def style(self) -> str | None:
        """The accent as a style sheet of one rule; the API keeps it ``#rrggbb``."""
        accent = self.application.get("portal_accent")
        return f":root{{--accent:{accent}}}" if accent else None

    @property
    def place(self) -> PortalPlace:
        return PortalPlace(str(self.application["id"]), self.application)


def _source_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def security_headers(brand: Brand | None) -> dict[str, str]:
    """The dashboard's headers, but Referrer-Policy no-referrer (no portal URL is ever told
    to anyone; the forms' origin check, session.valid_form_token, takes the "Origin: null"
    browsers then send from Sec-Fetch-Site). On an application's pages (``brand``) three
    more differences: framing by its own origins only (none without them), its logo's
    origin for images, and its accent's one rule allowed by hash (never 'unsafe-inline')."""
    headers = {**SECURITY_HEADERS, "Referrer-Policy": "no-referrer"}
    if brand is None:
        return headers
    csp = dict(
        d.strip().split(" ", 1) for d in SECURITY_HEADERS["Content-Security-Policy"].split(";")
    )
    ancestors = frame_ancestors(brand.application)
    csp["frame-ancestors"] = ancestors
    if ancestors != "'none'":
        # X-Frame-Options knows no list of origins: CSP alone says who may frame.
        del headers["X-Frame-Options"]
    if brand.logo is not None:
        parts = urlsplit(brand.logo)
        csp["img-src"] += f" https://{parts.netloc}"
    if brand.style is not None:
        csp["style-src"] += " " + _source_hash(brand.style)
    headers["Content-Security-Policy"] = "; ".join(f"{k} {v}" for k, v in csp.items())
    return headers


def apply_security_headers(response: web.StreamResponse, brand: Brand | None) -> None:
    for name, value in security_headers(brand).items():
        response.headers[name] = value


def page(
    title: str,
    body: Markup,
    session: PortalSession,
    brand: Brand,
    *,
    active: str = "",
    trail: list[tuple[str, str]] | None = None,
    note: str = "",
    error: bool = False,
    status: int = 200,
    refresh: int | None = None,
) -> web.Response:
    """A whole portal page of ``brand``'s application, with its headers set."""
    html = render(
        _PAGE,
        title=title,
        name=brand.name,
        style=render("\n<style>$s</style>", s=brand.style) if brand.style else Markup(""),
        logo=render('<img class="logo" src="$src" alt="">', src=brand.logo)
        if brand.logo
        else Markup(""),
        nav=nav_links(_NAV, active),
        account=post_button(PREFIX + "/logout", "Sign out", session, css="link"),
        crumbs=breadcrumbs(trail or [], title),
        notice=notice_line(note, error),
        body=body,
        refresh="" if refresh is None else refresh,
    )
    response = web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
    apply_security_headers(response, brand)
    return response


def notice(request: web.Request) -> str:
    return NOTICES.get(request.query.get("done", ""), "")


def error_page(
    status: int, title: str, detail: str, session: PortalSession, brand: Brand
) -> web.Response:
    body = render(
        '<p class="detail">$detail</p><p><a href="/portal">Back to your endpoints</a></p>',
        detail=detail,
    )
    return page(title, body, session, brand, status=status, error=True)


_NO_SESSION = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>$title</title>
<link rel="stylesheet" href="/dashboard/static/dashboard.css">
<link rel="stylesheet" href="/portal/static/portal.css"></head>
<body class="portal"><main><h1>$title</h1><p class="detail">$detail</p></main></body></html>
"""


def signed_out_page(status: int, title: str, detail: str) -> web.Response:
    """For a request with no portal session: no application to brand it with, and nothing
    of any application in it."""
    html = render(_NO_SESSION, title=title, detail=detail)
    response = web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
    apply_security_headers(response, None)
    return response
