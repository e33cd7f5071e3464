"""The dashboard's portal link form: its defaults are the API's, it posts to its own place's
route with the session's form token. (In Chromium: tests/integration/
test_dashboard_portal_links.py.)"""

from __future__ import annotations

import re

from webhook_service.dashboard.application_pages import (
    CAPABILITY_WORDS,
    EXPIRY_CHOICES,
    portal_link_form,
)
from webhook_service.dashboard.places import FLAT, within
from webhook_service.dashboard.session import Session
from webhook_service.portal_access import (
    DEFAULT_CAPABILITIES,
    DEFAULT_EXPIRES_IN,
    MAX_EXPIRES_IN,
    MIN_EXPIRES_IN,
    Capability,
)

SESSION = Session("key", "form-token", 0, "sid")


def _boxes(html: str) -> dict[str, str]:
    """Each capability's checkbox: its attributes after the value."""
    return dict(re.findall(r'name="capabilities" value="(\w+)"([^>]*)>', html))


def test_the_form_starts_as_the_api_would_without_a_choice() -> None:
    html = portal_link_form(within({"id": "app_01ACME", "name": "Acme"}), SESSION)
    boxes = _boxes(html)
    assert set(boxes) == {c.value for c in Capability} == set(CAPABILITY_WORDS)
    ticked = {name for name, attributes in boxes.items() if "checked" in attributes}
    assert ticked == {c.value for c in DEFAULT_CAPABILITIES | {Capability.VIEW}}
    # View is held by every link: shown, never sent as a choice.
    assert boxes["view"] == " checked disabled"
    assert "disabled" not in "".join(v for k, v in boxes.items() if k != "view")
    # The first choice is the selected one, and the API's default.
    assert EXPIRY_CHOICES[0][1] == DEFAULT_EXPIRES_IN
    assert all(MIN_EXPIRES_IN <= seconds <= MAX_EXPIRES_IN for _, seconds in EXPIRY_CHOICES)
    assert 'action="/dashboard/applications/app_01ACME/portal-links"' in html
    assert '<input type="hidden" name="csrf" value="form-token">' in html


def test_the_flat_form_posts_to_the_flat_page() -> None:
    assert 'action="/dashboard/portal-links"' in portal_link_form(FLAT, SESSION)
