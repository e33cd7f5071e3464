"""Adding and editing an endpoint in the portal: its URL, the event types it takes (picked
from the catalog, each with its description, schema and example), its channels.

The form, reading it and the plain words for a refused URL are the dashboard's too
(dashboard/endpoint_form.py); this module puts them on the portal's pages.
"""

from __future__ import annotations

from aiohttp import web

from webhook_service.admin.api import JSON, AdminApi
from webhook_service.api.body import read_form
from webhook_service.client.errors import APIError
from webhook_service.dashboard import catalog
from webhook_service.dashboard.access import redirect
from webhook_service.dashboard.endpoint_form import (
    BLOCKED_REASONS as BLOCKED_REASONS,  # where the portal's tests read them
)
from webhook_service.dashboard.endpoint_form import (
    EndpointForm,
    FormFrame,
    form_markup,
    refusal,
    subscriber_fields,
)
from webhook_service.dashboard.markup import Markup, render
from webhook_service.portal import layout
from webhook_service.portal.layout import Brand
from webhook_service.portal.place import path
from webhook_service.portal.secret_pages import shown_once
from webhook_service.portal.session import PortalSession
from webhook_service.portal.views import portal_page


def render_form(
    session: PortalSession, action: str, form: EndpointForm, types: list[JSON], submit: str,
    cancel: str,
) -> Markup:  # fmt: skip
    fields = subscriber_fields(form, catalog.choices(types, form.event_types), {})
    return form_markup(FormFrame(action, submit, cancel, session.csrf), fields)


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
