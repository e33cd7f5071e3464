"""The portal session's pure parts: the CSP frame-ancestors of an application's pages."""

from __future__ import annotations

from webhook_service.portal.session import frame_ancestors


def test_frame_ancestors_are_the_applications_origins_or_none() -> None:
    assert frame_ancestors({"portal_origins": None}) == "'none'"
    assert frame_ancestors({"portal_origins": []}) == "'none'"
    assert frame_ancestors({}) == "'none'"
    origins = ["https://a.example", "https://b.example:8443"]
    assert (
        frame_ancestors({"portal_origins": origins}) == "https://a.example https://b.example:8443"
    )
