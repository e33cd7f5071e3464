"""Where a dashboard page is: within one application, or on the flat pages.

Every page but the sign-in and the list of applications has two forms, as the API's routes
do (api/routing.py): flat, ``/dashboard/endpoints/…``, calling the flat API routes (the
default application, or the one the key is bound to), and within an application,
``/dashboard/applications/{app}/endpoints/…``, calling ``/v1/applications/{app}/…``. One
handler serves both: the place says which API routes it calls and which links it draws,
so a page within an application links only to pages within it.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from webhook_service.admin.api import JSON, AdminApi
from webhook_service.client.errors import APIError
from webhook_service.dashboard.markup import path
from webhook_service.store.applications import DEFAULT_APP_ID

PREFIX = "/dashboard"
APPLICATIONS = "applications"
# What a page's form within an application puts between /dashboard and its flat path.
NESTED_PREFIX = f"{PREFIX}/{APPLICATIONS}/{{app}}"

Crumb = tuple[str, str]  # a page above this one: its label and its URL


@dataclass(frozen=True)
class Place:
    # The application as the page's URL names it (an id or a uid); None: the flat pages.
    app: str | None = None
    # Its record (GET /v1/applications/{app}); None on the flat pages, or when the key lacks
    # applications:read: the page then names the application as its URL does.
    application: JSON | None = None

    def path(self, *segments: str) -> str:
        """A page of this place: ``path("deliveries")`` is its deliveries list."""
        if self.app is None:
            return path(*segments)
        return path(APPLICATIONS, self.app, *segments)

    @property
    def home(self) -> str:
        """Its endpoints: /dashboard, or the application's own overview."""
        return self.path()

    @property
    def label(self) -> str:
        if self.application is not None:
            return str(self.application["name"])
        return self.app or ""

    @property
    def crumbs(self) -> list[Crumb]:
        """The pages above every page of this place."""
        if self.app is None:
            return []
        return [("Applications", path(APPLICATIONS)), (self.label, self.home)]

    def of(self, record: JSON) -> Place:
        """Where a record listed here is shown: within this application, or, on a flat
        page listing several (an operator's deliveries), within the record's own. The
        default application's records stay on the flat pages, which act on it."""
        if self.app is not None:
            return self
        owner = record.get("application")
        if not owner or owner == DEFAULT_APP_ID:
            return self
        return Place(owner)


FLAT = Place()


def within(application: JSON) -> Place:
    """The pages of an application the API listed, named by its id: a uid may change."""
    return Place(str(application["id"]), application)


async def place_of(request: web.Request, api: AdminApi) -> Place:
    """The place the request's path names. An application the key may not see is the
    API's 404 (APIError), as every one of its records would be."""
    app = request.match_info.get("app")
    if app is None:
        return FLAT
    try:
        return Place(app, await api.application(app))
    except APIError as exc:
        if exc.status != 403:
            raise
        # No applications:read: the nested routes the page calls still check the rest.
        return Place(app)
