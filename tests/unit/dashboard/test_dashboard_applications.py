"""The dashboard's applications: the two forms of every page (flat, and within an
application) with one handler, and the links, header and breadcrumbs each form draws. (Each
application's figures: tests/unit/admin/test_application_health.py.)"""

from __future__ import annotations

from typing import Any

from webhook_service.admin.application_health import UNSEEN, summarize
from webhook_service.api.scopes import PUBLIC, ROUTE_SCOPES
from webhook_service.dashboard import ROUTES, layout
from webhook_service.dashboard.application_pages import HEADERS, application_row
from webhook_service.dashboard.delivery_pages import delivery_headers, delivery_rows
from webhook_service.dashboard.markup import render
from webhook_service.dashboard.places import FLAT, NESTED_PREFIX, Place, within
from webhook_service.dashboard.session import Session
from webhook_service.store.applications import DEFAULT_APP_ID

SESSION = Session("key", "token", 0, "sid")
ACME = {"id": "app_01ACME", "name": "Acme <Ltd>", "uid": "acme"}


def test_a_place_draws_its_own_links() -> None:
    acme = within(ACME)
    assert FLAT.path("deliveries", "dlv_1") == "/dashboard/deliveries/dlv_1"
    assert FLAT.home == "/dashboard" and FLAT.crumbs == []
    assert acme.path("endpoints", "ep_1") == "/dashboard/applications/app_01ACME/endpoints/ep_1"
    assert acme.home == "/dashboard/applications/app_01ACME"
    assert acme.crumbs == [("Applications", "/dashboard/applications"), ("Acme <Ltd>", acme.home)]
    # A uid from the URL is one segment, whatever it holds.
    assert Place("a/b?c").path("deliveries") == "/dashboard/applications/a%2Fb%3Fc/deliveries"
    # Without applications:read, the application is named as the URL names it.
    assert Place("acme").label == "acme"


def test_records_on_a_flat_page_link_to_their_own_application() -> None:
    assert FLAT.of({"application": "app_01BETA"}) == Place("app_01BETA")
    assert FLAT.of({"application": DEFAULT_APP_ID}) is FLAT
    assert FLAT.of({"application": None}) is FLAT
    acme = within(ACME)
    assert acme.of({"application": "app_01BETA"}) is acme


EARLY, LATE = "2026-01-31T12:00:00.000Z", "2026-01-31T12:05:00.000Z"


def _delivery(application: str | None) -> dict[str, Any]:
    return {
        "id": "dlv_" + "x" * 52, "application": application, "endpoint_id": "ep_1",
        "event_type": "a.b", "status": "failed", "attempts": 4, "last_status_code": 500,
        "last_error": None, "created_at": EARLY, "updated_at": LATE,
    }  # fmt: skip


def test_a_flat_delivery_list_names_each_application_and_a_nested_one_none() -> None:
    assert "Application" in delivery_headers(FLAT)
    [row] = delivery_rows(FLAT, [_delivery("app_01BETA")])
    html = "".join(str(cell) for cell in row)
    assert 'href="/dashboard/applications/app_01BETA"' in html
    assert 'href="/dashboard/applications/app_01BETA/endpoints/ep_1"' in html
    assert len(row) == len(delivery_headers(FLAT))
    acme = within(ACME)
    assert "Application" not in delivery_headers(acme)
    [row] = delivery_rows(acme, [_delivery("app_01ACME")])
    assert len(row) == len(delivery_headers(acme))
    assert 'href="/dashboard/applications/app_01ACME/deliveries/dlv_' in str(row[0])


def test_an_application_row_has_a_cell_for_every_heading() -> None:
    summed = summarize([{"disabled": False}, {"disabled": True}], None)
    row = application_row(ACME, summed)
    assert len(row) == len(HEADERS)
    by_heading = dict(zip(HEADERS, row, strict=True))
    assert (by_heading["Endpoints"], by_heading["Disabled"], by_heading["Failing"]) == (2, 1, "-")
    assert by_heading["Health"] == by_heading["Hour's deliveries"] == by_heading["Backlog"] == "-"
    assert 'href="/dashboard/applications/app_01ACME"' in str(by_heading["Application"])
    assert ">Acme &lt;Ltd&gt;<" in str(by_heading["Application"])
    # Nothing seen (no endpoints:read): every figure unknown, none made up.
    assert application_row(ACME, UNSEEN)[3:6] == ["-"] * 3


def test_a_page_within_an_application_names_it_in_its_header_and_breadcrumbs() -> None:
    acme = within(ACME)
    html = layout.page(
        "ep_1", render("<p>x</p>"), SESSION, place=acme, trail=[("Endpoints", acme.home)]
    ).text
    assert html is not None
    assert "<title>ep_1 · Acme &lt;Ltd&gt; · webhook-service</title>" in html
    assert (
        '<span class="application">Application <a href="/dashboard/applications/app_01ACME" '
        'title="app_01ACME">Acme &lt;Ltd&gt;</a> <code class="uid">acme</code></span>'
    ) in html
    assert (
        '<nav aria-label="Breadcrumb" class="crumbs"><ol>'
        '<li><a href="/dashboard/applications">Applications</a></li>'
        '<li><a href="/dashboard/applications/app_01ACME">Acme &lt;Ltd&gt;</a></li>'
        '<li><a href="/dashboard/applications/app_01ACME">Endpoints</a></li>'
        '<li aria-current="page">ep_1</li></ol></nav>'
    ) in html
    assert 'href="/dashboard/applications/app_01ACME/deliveries"' in html  # the navigation


def test_a_flat_top_page_has_no_application_and_no_breadcrumbs() -> None:
    html = layout.page("Endpoints", render(""), SESSION).text
    assert html is not None
    assert 'class="application"' not in html and "Breadcrumb" not in html
    assert '<a href="/dashboard/deliveries" class="">Deliveries</a>' in html
    assert '<a href="/dashboard/applications" class="">Applications</a>' in html


def test_every_page_has_both_forms_with_one_handler() -> None:
    flat = {(m, p): h for m, p, h in ROUTES if not p.startswith(NESTED_PREFIX)}
    nested = {(m, p): h for m, p, h in ROUTES if p.startswith(NESTED_PREFIX)}
    assert len(nested) == 21
    for (method, route), handler in nested.items():
        assert flat[(method, "/dashboard" + route[len(NESTED_PREFIX) :])] is handler, route
    single = {p for (_, p) in flat} - {"/dashboard" + p[len(NESTED_PREFIX) :] for _, p in nested}
    assert single == {
        "/dashboard/login", "/dashboard/logout", "/dashboard/applications",
        # The catalog is every application's.
        "/dashboard/event-types",
        "/dashboard/static/dashboard.css", "/dashboard/static/dashboard.js",
    }  # fmt: skip


def test_every_dashboard_route_is_listed_as_public() -> None:
    routes = {(m, p) for m, p, _ in ROUTES}
    listed = {k for k in ROUTE_SCOPES if k[1].startswith("/dashboard")}
    assert routes == listed
    assert all(ROUTE_SCOPES[k] is PUBLIC for k in listed)
