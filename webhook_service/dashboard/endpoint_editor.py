"""Creating and editing an endpoint from the dashboard: the form (endpoint_form.py, the
portal's fields and the operator's), posted to ``POST …/endpoints`` and ``PATCH
…/endpoints/{id}`` as the signed-in key, on the routes of the page's place, as
``webhook-service endpoints create`` and ``update`` do.

A refused form (the API's 422, or input that cannot be sent at all) comes back as typed,
with the problem's detail above it and each error beside its field: never an error page
for something the person can correct. The new endpoint's signing secret is shown once, on
the answer to the POST that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from webhook_service.admin.api import JSON, AdminApi
from webhook_service.api.body import read_form
from webhook_service.client.errors import APIError
from webhook_service.dashboard import catalog, layout
from webhook_service.dashboard.access import redirect, signed_in
from webhook_service.dashboard.endpoint_form import (
    DeliverySettings,
    EndpointForm,
    Errors,
    FormFrame,
    FormInvalid,
    changed,
    field_errors,
    form_markup,
    operator_fields,
    refusal,
    subscriber_fields,
)
from webhook_service.dashboard.endpoint_pages import secret_shown
from webhook_service.dashboard.markup import join, render
from webhook_service.dashboard.places import Place
from webhook_service.dashboard.session import Session

# What the form page says above a refused form whose every error is beside its field.
_SEE_BELOW = "Not saved: see the fields marked below."


@dataclass(frozen=True)
class Typed:
    """The whole form as typed, and what was wrong with it, if anything."""

    endpoint: EndpointForm = field(default_factory=EndpointForm)
    settings: DeliverySettings = field(default_factory=DeliverySettings)
    errors: Errors = field(default_factory=dict)
    note: str = ""

    @classmethod
    def of(cls, record: JSON) -> Typed:
        return cls(EndpointForm.of(record), DeliverySettings.of(record))

    @classmethod
    async def read(cls, request: web.Request) -> Typed:
        form = await read_form(request)
        return cls(EndpointForm.read(form), DeliverySettings.read(form))

    def fields(self) -> JSON:
        """The API's fields, or ``FormInvalid``."""
        return {**self.endpoint.fields(), **self.settings.fields()}

    def refused(self, error: APIError | FormInvalid) -> Typed:
        if isinstance(error, FormInvalid):
            return Typed(self.endpoint, self.settings, error.errors, _SEE_BELOW)
        beside = field_errors(error)
        # Above the form: the problem's detail, or for a refused URL the plain words; with
        # no error the form can show beside a field, every pointer too.
        blocked = error.problem.kind == "destination-blocked"
        note = refusal(error) if blocked or not beside else error.problem.detail
        return Typed(self.endpoint, self.settings, beside, note)


async def _form_page(
    api: AdminApi,
    session: Session,
    place: Place,
    typed: Typed,
    endpoint_id: str | None,
    status: int = 200,
) -> web.Response:
    types = await catalog.event_types_or_none(api)
    creating = endpoint_id is None
    if endpoint_id is None:
        title, trail = "New endpoint", [("Endpoints", place.home)]
        frame = FormFrame(place.path("endpoints"), "Create endpoint", place.home, session.csrf)
    else:
        here = place.path("endpoints", endpoint_id)
        title, trail = "Edit endpoint", [("Endpoints", place.home), (endpoint_id, here)]
        frame = FormFrame(here + "/edit", "Save", here, session.csrf)
    choices = catalog.choices(types, typed.endpoint.event_types)
    fields = join(
        [
            subscriber_fields(typed.endpoint, choices, typed.errors),
            operator_fields(typed.settings, typed.errors, creating=creating),
        ]
    )
    return layout.page(
        title,
        form_markup(frame, fields),
        session,
        place=place,
        trail=trail,
        active="endpoints",
        note=typed.note,
        error=bool(typed.note),
        status=status,
    )


@signed_in
async def new_endpoint(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    return await _form_page(api, session, place, Typed(), None)


@signed_in
async def create_endpoint(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    typed = await Typed.read(request)
    try:
        fields = {**typed.fields(), "signature": typed.settings.signature}
        created = await api.create_endpoint(fields)
    except FormInvalid as exc:
        return await _form_page(api, session, place, typed.refused(exc), None, 422)
    except APIError as exc:
        if exc.status != 422:
            raise
        return await _form_page(api, session, place, typed.refused(exc), None, 422)
    here = place.path("endpoints", created["id"])
    body = join(
        [
            render(
                "<p>Events of its types are sent to <code>$url</code> from now on.</p>",
                url=created["url"],
            ),
            secret_shown(place, created),
            render('<p><a href="$here">Go to the endpoint</a></p>', here=here),
        ]
    )
    return layout.page(
        "Endpoint created",
        body,
        session,
        place=place,
        trail=[("Endpoints", place.home)],
        active="endpoints",
    )


@signed_in
async def edit_endpoint(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    endpoint = await api.endpoint(request.match_info["endpoint_id"])
    return await _form_page(api, session, place, Typed.of(endpoint), endpoint["id"])


@signed_in
async def update_endpoint(
    request: web.Request, session: Session, api: AdminApi, place: Place
) -> web.StreamResponse:
    endpoint_id = request.match_info["endpoint_id"]
    typed = await Typed.read(request)
    try:
        # Only what differs from the endpoint as it is now goes in the PATCH.
        fields = changed(await api.endpoint(endpoint_id), typed.fields())
        if not fields:
            return redirect(place.path("endpoints", endpoint_id) + "?done=unchanged")
        saved = await api.update_endpoint(endpoint_id, fields)
    except FormInvalid as exc:
        return await _form_page(api, session, place, typed.refused(exc), endpoint_id, 422)
    except APIError as exc:
        if exc.status != 422:
            raise
        return await _form_page(api, session, place, typed.refused(exc), endpoint_id, 422)
    return redirect(place.path("endpoints", saved["id"]) + "?done=saved")
