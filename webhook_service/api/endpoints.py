"""Endpoints: create, list, read, change, delete, and show the signing secret."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from signer import InvalidKeyError, SigningKey, generate_keypair, generate_secret
from webhook_service.api.auth import CALLER
from webhook_service.api.body import read_model
from webhook_service.api.context import Services, services
from webhook_service.api.models import (
    EndpointIn,
    EndpointPatch,
    EventIn,
    RotateIn,
    endpoint_json,
)
from webhook_service.api.pagination import page_params
from webhook_service.api.problems import ProblemError
from webhook_service.api.routing import tenant_route
from webhook_service.api.scopes import Scope, grants
from webhook_service.api.tenancy import APP_NOT_FOUND, home_application
from webhook_service.delivery.ssrf import DestinationBlocked
from webhook_service.filters import Filter, FilterEvent, FilterInvalid
from webhook_service.ids import mark_of, new_id
from webhook_service.store.applications import DEFAULT_APP_ID
from webhook_service.store.endpoints import (
    ApplicationMissing,
    EndpointLimitReached,
    EndpointRecord,
    SealedSecret,
    open_headers,
    seal_headers,
)
from webhook_service.timeutil import iso, now_ms

routes = web.RouteTableDef()


async def _check_destination(svc: Services, url: str) -> None:
    try:
        await svc.guard.check_url_resolved(url)
    except DestinationBlocked as exc:
        raise ProblemError(
            422,
            f"This URL cannot receive webhooks: {exc.detail}",
            kind="destination-blocked",
            errors=[{"pointer": "/url", "detail": f"{exc.reason}: {exc.detail}"}],
        ) from None


ENDPOINT_NOT_FOUND = "No endpoint has this id."


def _filter_text(document: dict[str, Any] | None) -> str | None:
    """A body's filter as stored, or a 422 pointing at its invalid part; None: no filter."""
    if document is None:
        return None
    try:
        return Filter.parse(document).text
    except FilterInvalid as exc:
        raise ProblemError(
            422,
            f"The filter is not valid: {exc.detail}.",
            kind="invalid-filter",
            errors=[{"pointer": "/filter" + exc.pointer, "detail": exc.detail}],
        ) from None


async def load_endpoint(svc: Services, request: web.Request) -> EndpointRecord:
    """The endpoint the route's ``{endpoint_id}`` names in the request's application, or a
    404 problem: another application's endpoint is not there."""
    application = await home_application(request)
    record = await svc.endpoints.get(request.match_info["endpoint_id"])
    if record is None or record.application != application:
        raise ProblemError(404, ENDPOINT_NOT_FOUND)
    return record


def _operations_here(application: str, operations: bool | None) -> None:
    """Our operational events are the operator's: only an endpoint of the default
    application may take them, never one a tenant manages."""
    if operations and application != DEFAULT_APP_ID:
        raise ProblemError(
            422,
            "Only an endpoint of the default application may receive operational events.",
            errors=[{"pointer": "/operations", "detail": "only in the default application"}],
        )


def _shown_json(svc: Services, request: web.Request, record: EndpointRecord) -> dict[str, Any]:
    """The endpoint as this caller may see it. Header values often are the receiver's
    credentials: only a key that may change them (endpoints:write) reads them; any other
    sees each name with a null value."""
    headers: Mapping[str, str | None] = dict.fromkeys(record.sealed_headers)
    if grants(request[CALLER].scopes, Scope.ENDPOINTS_WRITE):
        headers = open_headers(svc.box, record.id, record.sealed_headers)
    return endpoint_json(record, headers)


@tenant_route(routes, "POST", "/v1/endpoints")
async def create_endpoint(request: web.Request) -> web.Response:
    svc = services(request)
    application = await home_application(request)
    body = await read_model(request, EndpointIn, svc.settings.max_payload_bytes)
    _operations_here(application, body.operations)
    await _check_destination(svc, body.url)
    now = now_ms()
    endpoint_id = new_id("ep", now, mark=mark_of(application))  # of its application's bucket
    secret, public_key = _new_key(body.signature)
    record = EndpointRecord(
        id=endpoint_id,
        application=application,
        url=body.url,
        description=body.description,
        event_types=body.event_types,
        disabled=body.disabled,
        created_ms=now,
        updated_ms=now,
        secrets=[SealedSecret(svc.box.seal(secret, endpoint_id))],
        signature=body.signature,
        public_key=public_key,
        sealed_headers=seal_headers(svc.box, endpoint_id, body.headers or {}),
        rate_limit=body.rate_limit,
        operations=body.operations,
        channels=body.channels,
        retry_schedule=None if body.retry_schedule is None else tuple(body.retry_schedule),
        timeout_seconds=body.timeout_seconds,
        ordering=body.ordering,
        send_traceparent=body.send_traceparent,
        filter=_filter_text(body.filter),
    )
    await _save_new(svc, record)
    return web.json_response(
        {**_shown_json(svc, request, record), **_shown(secret, public_key)}, status=201
    )


async def _save_new(svc: Services, record: EndpointRecord) -> None:
    """Refused, writing nothing, once the application has WEBHOOK_MAX_ENDPOINTS_PER_APP: every
    event fans out to its application's endpoints in one step, so their number bounds what
    one event may cost."""
    most = svc.settings.max_endpoints_per_app
    try:
        await svc.endpoints.save(record, creating=True, max_endpoints=most)
    except EndpointLimitReached:
        raise ProblemError(
            422,
            f"This application holds its limit of {most} endpoints "
            "(WEBHOOK_MAX_ENDPOINTS_PER_APP); delete one to create another.",
            kind="endpoint-limit-reached",
        ) from None
    except ApplicationMissing:
        raise ProblemError(404, APP_NOT_FOUND) from None


def _new_key(signature: str, supplied: str | None = None) -> tuple[str, str | None]:
    """(the key we sign with, the public key subscribers verify with, for ed25519)."""
    if supplied is None:
        if signature == "ed25519":
            return generate_keypair()
        return generate_secret(), None
    supplied = supplied.strip()
    prefix = "whsk_" if signature == "ed25519" else "whsec_"
    try:
        if not supplied.startswith(prefix):
            raise InvalidKeyError(f"a {signature} endpoint takes a {prefix}… key")
        return supplied, SigningKey.parse(supplied).public_key()
    except InvalidKeyError as exc:
        raise ProblemError(
            422,
            "The supplied secret is not usable.",
            errors=[{"pointer": "/secret", "detail": str(exc)}],
        ) from None


def _shown(secret: str, public_key: str | None) -> dict[str, str | None]:
    """An HMAC secret is shared with the subscriber; an ed25519 private key never leaves."""
    return {"secret": None if public_key else secret, "public_key": public_key}


@tenant_route(routes, "GET", "/v1/endpoints")
async def list_endpoints(request: web.Request) -> web.Response:
    svc = services(request)
    application = await home_application(request)
    limit, cursor = page_params(request)
    records, next_cursor = await svc.endpoints.page(limit, cursor, application)
    return web.json_response(
        {"data": [_shown_json(svc, request, r) for r in records], "next_cursor": next_cursor}
    )


@tenant_route(routes, "GET", "/v1/endpoints/{endpoint_id}")
async def get_endpoint(request: web.Request) -> web.Response:
    svc = services(request)
    return web.json_response(_shown_json(svc, request, await load_endpoint(svc, request)))


@tenant_route(routes, "PATCH", "/v1/endpoints/{endpoint_id}")
async def patch_endpoint(request: web.Request) -> web.Response:
    svc = services(request)
    record = await load_endpoint(svc, request)
    patch = await read_model(request, EndpointPatch, svc.settings.max_payload_bytes)
    given = patch.model_fields_set
    if "url" in given and patch.url is not None:
        await _check_destination(svc, patch.url)
        record.url = patch.url
    if "event_types" in given:
        record.event_types = patch.event_types
    if "description" in given and patch.description is not None:
        record.description = patch.description
    # Collections and limits: null clears them, as for event_types.
    if "headers" in given:
        record.sealed_headers = seal_headers(svc.box, record.id, patch.headers or {})
    if "rate_limit" in given:
        record.rate_limit = patch.rate_limit
    if "operations" in given and patch.operations is not None:
        _operations_here(record.application, patch.operations)
        record.operations = patch.operations
    if "channels" in given:
        record.channels = patch.channels
    # The policy applies from a pending delivery's next attempt (delivery/engine.py).
    if "retry_schedule" in given:
        record.retry_schedule = (
            None if patch.retry_schedule is None else tuple(patch.retry_schedule)
        )
    if "timeout_seconds" in given:
        record.timeout_seconds = patch.timeout_seconds
    if "ordering" in given:
        record.ordering = patch.ordering
    if "send_traceparent" in given and patch.send_traceparent is not None:
        record.send_traceparent = patch.send_traceparent
    # From the next event on: ingest checks the version it evaluated (api/endpoint_filters.py).
    if "filter" in given:
        record.filter = _filter_text(patch.filter)
    now = now_ms()
    record.updated_ms = now
    await svc.endpoints.save(record, creating=False)
    if "disabled" in given and patch.disabled is not None:
        await svc.endpoints.set_disabled(record.id, patch.disabled, now)
    return web.json_response(_shown_json(svc, request, await load_endpoint(svc, request)))


@tenant_route(routes, "POST", "/v1/endpoints/{endpoint_id}/enable")
async def enable_endpoint(request: web.Request) -> web.Response:
    return await _set_disabled(request, disabled=False)


@tenant_route(routes, "POST", "/v1/endpoints/{endpoint_id}/disable")
async def disable_endpoint(request: web.Request) -> web.Response:
    return await _set_disabled(request, disabled=True)


async def _set_disabled(request: web.Request, *, disabled: bool) -> web.Response:
    svc = services(request)
    record = await load_endpoint(svc, request)
    if not await svc.endpoints.set_disabled(record.id, disabled, now_ms()):
        raise ProblemError(404, ENDPOINT_NOT_FOUND)
    return web.json_response(_shown_json(svc, request, await load_endpoint(svc, request)))


@tenant_route(routes, "DELETE", "/v1/endpoints/{endpoint_id}")
async def delete_endpoint(request: web.Request) -> web.Response:
    svc = services(request)
    if not await svc.endpoints.delete((await load_endpoint(svc, request)).id):
        raise ProblemError(404, ENDPOINT_NOT_FOUND)
    return web.Response(status=204)


@tenant_route(routes, "GET", "/v1/endpoints/{endpoint_id}/secret")
async def get_secret(request: web.Request) -> web.Response:
    svc = services(request)
    record = await load_endpoint(svc, request)
    current = next(s for s in record.secrets if s.expires_ms is None)
    return web.json_response(_shown(svc.box.open(current.sealed, record.id), record.public_key))


@tenant_route(routes, "POST", "/v1/endpoints/{endpoint_id}/rotate-secret")
async def rotate_secret(request: web.Request) -> web.Response:
    svc = services(request)
    record = await load_endpoint(svc, request)
    body = RotateIn()
    if request.can_read_body:
        body = await read_model(request, RotateIn, svc.settings.max_payload_bytes)
    secret, public_key = _new_key(record.signature, body.secret)
    rotated = await svc.endpoints.rotate(
        record.id,
        svc.box.seal(secret, record.id),
        public_key,
        now_ms(),
        body.grace_period_seconds * 1000,
    )
    if rotated is None:
        raise ProblemError(404, ENDPOINT_NOT_FOUND)
    previous = [
        {"expires_at": iso(s.expires_ms)} for s in rotated.secrets if s.expires_ms is not None
    ]
    return web.json_response(
        {
            **_shown_json(svc, request, rotated),
            **_shown(secret, public_key),
            "previous_keys": previous,
        }
    )


@tenant_route(routes, "POST", "/v1/endpoints/{endpoint_id}/test-filter")
async def test_filter(request: web.Request) -> web.Response:
    """Whether an event, as a producer posts it, passes the endpoint's filter, and the
    clause that decided (a pointer into the endpoint's ``filter``). Only the filter: its
    event types and channels are the endpoint's other fields."""
    svc = services(request)
    record = await load_endpoint(svc, request)
    event = await read_model(request, EventIn, svc.settings.max_payload_bytes)
    if record.filter is None:
        return web.json_response(
            {"matches": True, "decided_by": None, "clause": "the endpoint has no filter"}
        )
    verdict = Filter.loads(record.filter).explain(
        FilterEvent(event.type, event.data, tuple(event.channels or ()))
    )
    return web.json_response(
        {
            "matches": verdict.matches,
            "decided_by": "/filter" + verdict.decided_by,
            "clause": verdict.clause,
        }
    )
