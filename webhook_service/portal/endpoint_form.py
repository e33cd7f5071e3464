"""Adding and editing an endpoint: its URL, the event types it takes (picked from the
catalog, each with its description, schema and example), its channels.

A URL the service refuses to send to (a private, loopback or otherwise internal address:
the API's 422 ``destination-blocked``) is explained in plain words on the form, with the
person's input kept, rather than as the API's terse reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web
from multidict import MultiDictProxy

from webhook_service.admin.api import JSON, AdminApi
from webhook_service.api.body import read_form
from webhook_service.client.errors import APIError
from webhook_service.dashboard.access import explain, redirect
from webhook_service.dashboard.markup import Markup, render
from webhook_service.dashboard.session import CSRF_FIELD
from webhook_service.portal import catalog, layout
from webhook_service.portal.layout import Brand
from webhook_service.portal.place import path
from webhook_service.portal.secret_pages import shown_once
from webhook_service.portal.session import PortalSession
from webhook_service.portal.views import portal_page

# Why the service would not take a URL (the reason the API gives in the problem's
# errors[].detail, before its colon), said for someone who never saw our service.
_PRIVATE = (
    "We only send webhooks to addresses on the public internet, never to private, "
    "loopback or cloud-internal ones (such as localhost, 127.0.0.1, 10.x.x.x, 192.168.x.x "
    "or 169.254.169.254), so that nobody can use them to reach machines inside our "
    "network. Use your server's public domain name or address."
)
BLOCKED_REASONS = {
    "blocked_address": "That address is not on the public internet. " + _PRIVATE,
    "localhost_name": "That name points at this machine or at an internal network. " + _PRIVATE,
    "non_canonical_ip": "Write an IP address as four numbers with dots (such as "
    "203.0.113.7), or better, use a domain name.",
    "scheme": "The URL must start with https:// (or http://).",
    "https_required": "Only https:// URLs are accepted: your endpoint must use TLS.",
    "userinfo": "Leave the user name and password out of the URL. To authenticate us, check "
    "our signature instead (see Verify signatures).",
    "bad_port": "The port in the URL is not a valid one (1 to 65535).",
    "no_host": "The URL has no host name: write it whole, such as https://example.com/webhooks.",
    "invalid_url": "That is not a URL we can read: write it whole, such as "
    "https://example.com/webhooks.",
    "unresolvable": "We could not find that host name. Check its spelling, or wait until "
    "its DNS record is published.",
}


def refusal(error: APIError) -> str:
    """What to tell a person whose URL or fields the API refused."""
    problem = error.problem
    if problem.kind == "destination-blocked":
        for item in problem.errors:
            reason = item.get("detail", "").split(":", 1)[0]
            if reason in BLOCKED_REASONS:
                return BLOCKED_REASONS[reason]
        return f"We cannot send webhooks to this URL. {_PRIVATE}"
    return explain(error)


@dataclass(frozen=True)
class EndpointForm:
    """What the form holds: as typed, so a refused one is shown again unchanged."""

    url: str = ""
    description: str = ""
    event_types: tuple[str, ...] = ()
    channels: str = ""

    @classmethod
    def of(cls, endpoint: JSON) -> EndpointForm:
        return cls(
            endpoint["url"],
            endpoint.get("description") or "",
            tuple(endpoint.get("event_types") or ()),
            ", ".join(endpoint.get("channels") or ()),
        )

    @classmethod
    def read(cls, form: MultiDictProxy[str]) -> EndpointForm:
        return cls(
            form.get("url", "").strip(),
            form.get("description", "").strip(),
            tuple(form.getall("event_types", [])),
            form.get("channels", ""),
        )

    def fields(self) -> JSON:
        """The API's fields. No type ticked: every type; no channel: every event."""
        channels = [c.strip() for c in self.channels.split(",") if c.strip()]
        return {
            "url": self.url,
            "description": self.description,
            "event_types": list(self.event_types) or None,
            "channels": channels or None,
        }


_FORM = """<form method="post" action="$action" class="endpoint-form">
<input type="hidden" name="$csrf_field" value="$csrf">
<label>Endpoint URL <input type="url" name="url" value="$url" required
 placeholder="https://example.com/webhooks" autocomplete="off"></label>
<p class="hint">Where we POST each event. It must be reachable from the internet.</p>
<label>Description <input type="text" name="description" value="$description"
 placeholder="Production orders"></label>
<fieldset><legend>Event types</legend>
<p class="hint">Tick the events to receive; tick none to receive every type.</p>$types
</fieldset>
<label>Channels <input type="text" name="channels" value="$channels"
 placeholder="eu, priority"></label>
<p class="hint">Optional, separated by commas: only events sent to one of these channels
reach this endpoint. Leave empty for every event of its types.</p>
<button type="submit" class="primary">$submit</button> <a href="$cancel">Cancel</a>
</form>"""


def render_form(
    session: PortalSession, action: str, form: EndpointForm, types: list[JSON], submit: str,
    cancel: str,
) -> Markup:  # fmt: skip
    return render(
        _FORM,
        action=action,
        csrf_field=CSRF_FIELD,
        csrf=session.csrf,
        url=form.url,
        description=form.description,
        types=catalog.choices(types, form.event_types),
        channels=form.channels,
        submit=submit,
        cancel=cancel,
    )


async def _form_page(
    session: PortalSession, api: AdminApi, brand: Brand, form: EndpointForm, *,
    endpoint_id: str | None, note: str = "", status: int = 200,
) -> web.Response:  # fmt: skip
    types = await catalog.event_types(api)
    if endpoint_id is None:
        title, action, cancel, submit = "Add an endpoint", path("endpoints"), path(), "Add endpoint"
        trail = [("Endpoints", path())]
    else:
        here = path("endpoints", endpoint_id)
        title, action, cancel, submit = "Edit endpoint", here + "/edit", here, "Save"
        trail = [("Endpoints", path()), (endpoint_id, here)]
    body = render_form(session, action, form, types, submit, cancel)
    return layout.page(
        title, body, session, brand, active="endpoints", trail=trail, note=note,
        error=bool(note), status=status,
    )  # fmt: skip


@portal_page
async def new_endpoint(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    return await _form_page(session, api, brand, EndpointForm(), endpoint_id=None)


@portal_page
async def create_endpoint(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    form = EndpointForm.read(await read_form(request))
    try:
        created = await api.create_endpoint(form.fields())
    except APIError as exc:
        if exc.status != 422:
            raise
        return await _form_page(
            session, api, brand, form, endpoint_id=None, note=refusal(exc), status=422
        )
    here = path("endpoints", created["id"])
    body = render(
        "<p>We now send events to <code>$url</code>.</p>$secret"
        '<p><a href="$here">Go to the endpoint</a> · <a href="$verify">How to check our '
        "signature</a></p>",
        url=created["url"],
        secret=shown_once(created),
        here=here,
        verify=path("verify"),
    )
    return layout.page(
        "Endpoint added", body, session, brand, active="endpoints",
        trail=[("Endpoints", path())], note=layout.NOTICES["created"],
    )  # fmt: skip


@portal_page
async def edit_endpoint(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    endpoint = await api.endpoint(request.match_info["endpoint_id"])
    return await _form_page(
        session, api, brand, EndpointForm.of(endpoint), endpoint_id=endpoint["id"]
    )


@portal_page
async def update_endpoint(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    endpoint_id = request.match_info["endpoint_id"]
    form = EndpointForm.read(await read_form(request))
    try:
        saved = await api.update_endpoint(endpoint_id, form.fields())
    except APIError as exc:
        if exc.status != 422:
            raise
        return await _form_page(
            session, api, brand, form, endpoint_id=endpoint_id, note=refusal(exc), status=422
        )
    return redirect(path("endpoints", saved["id"]) + "?done=saved")
