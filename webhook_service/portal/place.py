"""Where a portal page is: its URLs, all under /portal, of the session's one application.

The portal draws the dashboard's tables and rows (dashboard/delivery_pages.py), which link
through a ``Place``. Its place is one application's and links to the portal's own pages, so
a row drawn for the portal never points into the dashboard, nor at another application.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from webhook_service.dashboard.places import Place

PREFIX = "/portal"


def path(*segments: str) -> str:
    """A portal URL whose segments (ids from the API or a person) are percent-encoded."""
    return PREFIX + "".join("/" + quote(s, safe="") for s in segments)


@dataclass(frozen=True)
class PortalPlace(Place):
    """The session's application: ``app`` is always set, so a record is shown here
    (``Place.of``) and a list never gets the dashboard's column naming each application."""

    def path(self, *segments: str) -> str:
        return path(*segments)

    @property
    def crumbs(self) -> list[tuple[str, str]]:
        return []
