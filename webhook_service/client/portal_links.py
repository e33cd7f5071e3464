"""A subscriber portal link, without I/O: the request for one and what its answer means.

``POST /v1/applications/{app}/portal-access`` is asked once, never retried as a send is:
each answer that is lost made a link of its own, which nobody holds but which opens the
portal until it expires. A caller who got no answer asks again, knowingly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from webhook_service.client.attempts import PreparedRequest, application_url, json_headers
from webhook_service.client.errors import ClientError, ProblemDetails, TransportError, error_for


@dataclass(frozen=True)
class PortalLink:
    """A link to one application's subscriber portal: hand ``url`` to the subscriber. It
    opens the portal until ``expires_at`` (UTC), with ``capabilities``; ``token`` is in it."""

    url: str
    token: str
    expires_at: datetime
    capabilities: frozenset[str]


def portal_link_request(
    base_url: str,
    api_key: str,
    app: str,
    expires_in: int | None,
    capabilities: Iterable[str] | None,
    read_only: bool,
) -> PreparedRequest:
    """None leaves a field to the service's default: an hour, and every capability but
    ``view_secrets`` (``view`` is always held; ``read_only`` holds it alone)."""
    if isinstance(capabilities, str):
        raise TypeError("capabilities is a list of names, not one string")
    body: dict[str, Any] = {"read_only": read_only}
    if expires_in is not None:
        body["expires_in"] = expires_in
    if capabilities is not None:
        body["capabilities"] = list(capabilities)
    url = application_url(base_url, app, "portal-access")
    return PreparedRequest(url, orjson.dumps(body), json_headers(api_key))


def portal_link_of(status: int, body: bytes) -> PortalLink:
    """The link the service answered, or its refusal as a typed error: 401/403
    ``AuthenticationError`` (no applications:write, or bound to another application),
    404 and 422 ``ClientError`` (no such application; a field out of bounds), 5xx
    ``ServerError``."""
    if not 200 <= status < 300:
        raise error_for(ProblemDetails.parse(status, body), ClientError)
    try:
        made = orjson.loads(body)
        return PortalLink(
            url=str(made["url"]),
            token=str(made["token"]),
            expires_at=datetime.fromisoformat(made["expires_at"]),
            capabilities=frozenset(made["capabilities"]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise TransportError(f"the service answered {status} without a portal link") from exc
