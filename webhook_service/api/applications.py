"""Applications: the tenants, one per customer of the producer, each with its own endpoints,
events and history (api/tenancy.py). Create, list, read, change, delete."""

from __future__ import annotations

from aiohttp import web

from webhook_service.api.body import read_model
from webhook_service.api.context import services
from webhook_service.api.jobs import start_deletion
from webhook_service.api.models import ApplicationIn, ApplicationPatch, application_json
from webhook_service.api.pagination import page_params
from webhook_service.api.problems import ProblemError
from webhook_service.api.tenancy import bound_application, home_application
from webhook_service.store.applications import (
    DEFAULT_APP_ID,
    DEFAULT_APP_UID,
    ApplicationOutcome,
    ApplicationRecord,
    PortalOptions,
    new_app_id,
)
from webhook_service.timeutil import now_ms

routes = web.RouteTableDef()


def _uid_taken(uid: str | None) -> ProblemError:
    return ProblemError(
        409,
        f"Another application has the uid {uid!r}.",
        kind="uid-taken",
        errors=[{"pointer": "/uid", "detail": "taken by another application"}],
    )


def _operator_only(request: web.Request, what: str) -> None:
    # A bound key manages its own application's resources, never the set of applications.
    if bound_application(request) is not None:
        raise ProblemError(
            403,
            f"A key bound to an application cannot {what} applications.",
            kind="bound-key",
        )


@routes.post("/v1/applications")
async def create_application(request: web.Request) -> web.Response:
    _operator_only(request, "create")
    svc = services(request)
    body = await read_model(request, ApplicationIn, svc.settings.max_payload_bytes)
    now = now_ms()
    record = ApplicationRecord(
        id=new_app_id(now, body.uid),
        name=body.name,
        uid=body.uid,
        metadata=dict(body.metadata),
        rate_limit=body.rate_limit,
        created_ms=now,
        updated_ms=now,
        portal=body.portal(PortalOptions()),
    )
    if await svc.applications.create(record) is ApplicationOutcome.UID_TAKEN:
        raise _uid_taken(body.uid)
    return web.json_response(application_json(record), status=201)


@routes.get("/v1/applications")
async def list_applications(request: web.Request) -> web.Response:
    svc = services(request)
    bound = bound_application(request)
    if bound is not None:
        # Its own application, or nothing: the list must not say which others exist.
        own = await svc.applications.get(bound)
        uid = request.query.get("uid")
        shown = [own] if own is not None and uid in (None, own.uid) else []
        return web.json_response(
            {"data": [application_json(a) for a in shown], "next_cursor": None}
        )
    limit, cursor = page_params(request)
    records, next_cursor = await svc.applications.page(limit, cursor, uid=request.query.get("uid"))
    return web.json_response(
        {"data": [application_json(r) for r in records], "next_cursor": next_cursor}
    )


async def _load(request: web.Request) -> ApplicationRecord:
    svc = services(request)
    record = await svc.applications.get(await home_application(request))
    if record is None:  # deleted since it was resolved
        raise ProblemError(404, "No application has this id or uid.")
    return record


@routes.get("/v1/applications/{app}")
async def get_application(request: web.Request) -> web.Response:
    return web.json_response(application_json(await _load(request)))


@routes.patch("/v1/applications/{app}")
async def patch_application(request: web.Request) -> web.Response:
    svc = services(request)
    record = await _load(request)
    patch = await read_model(request, ApplicationPatch, svc.settings.max_payload_bytes)
    given = patch.model_fields_set
    for operators in ("rate_limit", "portal_origins"):
        # The limit is the operator's quota on the tenant, not the tenant's to lift; the
        # origins loosen the portal's framing and its cookie (portal/session.py), which is
        # the operator's to choose for the site it frames the portal in.
        if operators in given and bound_application(request) is not None:
            raise ProblemError(
                403,
                f"A key bound to an application cannot change its {operators}.",
                kind="bound-key",
            )
    if record.id == DEFAULT_APP_ID and "uid" in given and patch.uid != record.uid:
        # The flat routes find the default application by its id, people by this uid.
        raise ProblemError(
            422,
            "The default application keeps its uid.",
            errors=[{"pointer": "/uid", "detail": "the default application's uid is fixed"}],
        )
    changed = ApplicationRecord(
        id=record.id,
        name=patch.name if "name" in given and patch.name is not None else record.name,
        # null clears the uid, the metadata and the limit.
        uid=patch.uid if "uid" in given else record.uid,
        metadata=dict(patch.metadata or {}) if "metadata" in given else record.metadata,
        rate_limit=patch.rate_limit if "rate_limit" in given else record.rate_limit,
        created_ms=record.created_ms,
        updated_ms=now_ms(),
        portal=patch.portal(record.portal),
    )
    outcome = await svc.applications.update(changed)
    if outcome is ApplicationOutcome.UID_TAKEN:
        raise _uid_taken(changed.uid)
    if outcome is ApplicationOutcome.MISSING:
        raise ProblemError(404, "No application has this id or uid.")
    return web.json_response(application_json(changed))


@routes.delete("/v1/applications/{app}")
async def delete_application(request: web.Request) -> web.Response:
    if bound_application(request) is not None:
        # Another application, or none, is not there for a bound key (404, as everywhere);
        # its own it may not delete.
        await _load(request)
    _operator_only(request, "delete")
    # By its id or uid, made yet or not: its uid is its own even before it exists.
    if request.match_info["app"] in (DEFAULT_APP_ID, DEFAULT_APP_UID):
        raise ProblemError(
            409, "The default application, which the flat routes act on, is never deleted."
        )
    return await start_deletion(request, (await _load(request)).id)
