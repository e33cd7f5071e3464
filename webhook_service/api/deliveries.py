"""Delivery history: list with filters, one delivery with its attempts, manual retry.

Read through ``services.history``: lists from the SQL log (they lag the shipper by about
WEBHOOK_LOG_SHIP_INTERVAL), one delivery from Redis first, then the log."""

from __future__ import annotations

from aiohttp import web

from webhook_service.api.context import Services, services
from webhook_service.api.models import attempt_json, delivery_json
from webhook_service.api.pagination import page_params, query_problem
from webhook_service.api.problems import ProblemError
from webhook_service.api.routing import tenant_route
from webhook_service.api.tenancy import (
    ensure_live,
    ensure_visible,
    not_found,
    resolve,
    visible_application,
)
from webhook_service.history.filters import DeliveryFilter
from webhook_service.store.deliveries import STATUS_CLASSES, DeliveryRecord, RetryOutcome
from webhook_service.store.states import STATUSES
from webhook_service.timeutil import now_ms, parse_instant

routes = web.RouteTableDef()


def _query_time(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        return parse_instant(raw)
    except ValueError:
        raise query_problem(
            name, "an ISO 8601 date-time from 1970 on, e.g. 2026-01-31T12:00:00Z"
        ) from None


def query_times(request: web.Request) -> tuple[int | None, int | None]:
    """The ``since`` and ``until`` of a history query, in ms; a window that ends before it
    starts is refused rather than answered with nothing (or, for a bulk retry, a no-op)."""
    since, until = _query_time(request, "since"), _query_time(request, "until")
    if since is not None and until is not None and until < since:
        raise query_problem("until", "not before since")
    return since, until


def _choice(request: web.Request, name: str, allowed: tuple[str, ...]) -> str | None:
    value = request.query.get(name)
    if value is not None and value not in allowed:
        raise query_problem(name, "one of " + ", ".join(allowed))
    return value


def _count(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 6:
        raise query_problem(name, "a whole number of attempts, 0 or more")
    return int(raw)


async def listed_application(request: web.Request) -> str | None:
    """The application a history list or bulk retry covers: the path's or the key's, else
    the ``application`` query parameter (an id or a uid), else every one. Naming another
    application than the caller's own is answered 404, as for any of its records."""
    scope = await visible_application(request)
    named = request.query.get("application")
    if named is None:
        return scope
    if len(named) > 256 or not named.isascii():
        raise query_problem("application", "an application id or uid")
    application = await resolve(services(request), request, named)
    ensure_visible(scope, application, not_found())
    return application


async def delivery_filter(request: web.Request) -> DeliveryFilter:
    """The history filters from the query string, shared by the list and bulk retry."""
    since, until = query_times(request)
    return DeliveryFilter(
        application=await listed_application(request),
        endpoint_id=request.query.get("endpoint_id"),
        event_id=request.query.get("event_id"),
        status=_choice(request, "status", STATUSES),
        event_type=request.query.get("event_type"),
        since_ms=since,
        until_ms=until,
        status_class=_choice(request, "status_class", STATUS_CLASSES),
        attempts_min=_count(request, "attempts_min"),
        attempts_max=_count(request, "attempts_max"),
    )


@tenant_route(routes, "GET", "/v1/deliveries")
async def list_route(request: web.Request) -> web.Response:
    svc = services(request)
    query = await delivery_filter(request)
    limit, cursor = page_params(request)
    page = await svc.history.list_deliveries(query, limit, cursor)
    return web.json_response(
        {"data": [delivery_json(d) for d in page.items], "next_cursor": page.next_cursor}
    )


_NO_DELIVERY = "No delivery has this id."


async def _application_of(svc: Services, record: DeliveryRecord) -> str | None:
    """A delivery's application is its event's; Redis keeps it on the event alone."""
    if record.application is not None:
        return record.application
    event = await svc.history.get_event(record.event_id)
    return None if event is None else event.application


async def load_delivery(request: web.Request, *, acting: bool = False) -> DeliveryRecord:
    """The delivery the route names, if the caller may see its application, or a 404; to act
    on it (``acting``), its application must still exist."""
    svc = services(request)
    scope = await visible_application(request)
    record = await svc.history.get_delivery(request.match_info["delivery_id"])
    missing = ProblemError(404, _NO_DELIVERY)
    if record is None:
        raise missing
    if scope is not None or acting:
        application = await _application_of(svc, record)
        ensure_visible(scope, application, missing)
        if acting:
            await ensure_live(svc, application, missing)
    return record


@tenant_route(routes, "GET", "/v1/deliveries/{delivery_id}")
async def get_delivery(request: web.Request) -> web.Response:
    svc = services(request)
    record = await load_delivery(request)
    attempts = await svc.history.attempt_log(record)
    return web.json_response(
        {**delivery_json(record), "attempt_log": [attempt_json(a) for a in attempts]}
    )


@tenant_route(routes, "POST", "/v1/deliveries/{delivery_id}/retry")
async def retry_delivery(request: web.Request) -> web.Response:
    svc = services(request)
    delivery_id = (await load_delivery(request, acting=True)).id
    [outcome] = await svc.reviver.retry(
        svc.deliveries, [delivery_id], now_ms(), int(svc.settings.wakeup_grace * 1000)
    )
    if outcome is RetryOutcome.MISSING:
        raise ProblemError(404, _NO_DELIVERY)
    if outcome is RetryOutcome.PENDING:
        raise ProblemError(409, "This delivery is already pending; it will be attempted.")
    await svc.waker.wake([delivery_id], retry=True)
    record = await svc.history.get_delivery(delivery_id)
    assert record is not None  # pending again: in Redis
    return web.json_response(delivery_json(record), status=202)
