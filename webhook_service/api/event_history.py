"""The event history: list events, read one, replay one, expunge a payload.

Read through ``services.history``: the list from the SQL log (it lags the shipper by about
WEBHOOK_LOG_SHIP_INTERVAL), one event from Redis first (an event just accepted is there),
then the log."""

from __future__ import annotations

import orjson
from aiohttp import web

from webhook_service.api.auth import CALLER
from webhook_service.api.body import read_model
from webhook_service.api.context import services
from webhook_service.api.deliveries import listed_application, query_times
from webhook_service.api.endpoint_filters import fan_out_filtered
from webhook_service.api.models import ReplayIn, delivery_json, event_summary_json
from webhook_service.api.pagination import page_params
from webhook_service.api.problems import ProblemError
from webhook_service.api.routing import tenant_route
from webhook_service.api.scopes import Scope
from webhook_service.api.tenancy import ensure_live, ensure_visible, visible_application
from webhook_service.filters import FilterEvent
from webhook_service.history.filters import EventFilter
from webhook_service.store.events import (
    CancelOutcome,
    EventRecord,
    ExpungeOutcome,
    Replayed,
    ReplayOutcome,
)
from webhook_service.timeutil import iso, now_ms

routes = web.RouteTableDef()


@tenant_route(routes, "GET", "/v1/events")
async def list_route(request: web.Request) -> web.Response:
    since, until = query_times(request)
    query = EventFilter(
        application=await listed_application(request),
        event_type=request.query.get("type"),
        key_id=request.query.get("key_id"),
        since_ms=since,
        until_ms=until,
    )
    limit, cursor = page_params(request)
    page = await services(request).history.list_events(query, limit, cursor)
    return web.json_response(
        {"data": [event_summary_json(e) for e in page.items], "next_cursor": page.next_cursor}
    )


_NO_EVENT = "No event has this id."


async def load_event(request: web.Request, *, acting: bool = False) -> EventRecord:
    """The event the route names, if the caller may see its application, or a 404; to act
    on it (``acting``), its application must still exist."""
    svc = services(request)
    scope = await visible_application(request)
    record = await svc.history.get_event(request.match_info["event_id"])
    missing = ProblemError(404, _NO_EVENT)
    if record is None:
        raise missing
    ensure_visible(scope, record.application, missing)
    if acting:
        await ensure_live(svc, record.application, missing)
    return record


@tenant_route(routes, "GET", "/v1/events/{event_id}")
async def get_event(request: web.Request) -> web.Response:
    history = services(request).history
    record = await load_event(request)
    payload = orjson.loads(record.body) if record.body else None
    deliveries = await history.deliveries(record.delivery_ids)
    return web.json_response(
        {
            "id": record.id,
            "application": record.application,
            "type": record.type,
            "channels": list(record.channels),
            "example": record.example,
            "timestamp": iso(record.created_ms),
            "deliver_at": None if record.deliver_at_ms is None else iso(record.deliver_at_ms),
            "data": payload["data"] if payload else None,
            "deliveries": [delivery_json(d) for d in deliveries],
        }
    )


def _sender(request: web.Request) -> str | None:
    """Whose events the caller may replay or expunge: those sent with its own key; an admin
    may act on any (None). Another producer's events are answered as missing (404), as
    if they did not exist, rather than 403, which would say that they do."""
    caller = request[CALLER]
    return None if Scope.ADMIN in caller.scopes else caller.key_id


def _refusal(outcome: ReplayOutcome) -> ProblemError:
    if outcome is ReplayOutcome.MISSING:
        return ProblemError(404, _NO_EVENT)
    if outcome is ReplayOutcome.NO_PAYLOAD:
        return ProblemError(409, "This event's payload was deleted: there is nothing to send.")
    if outcome is ReplayOutcome.ENDPOINT_DISABLED:
        return ProblemError(409, "This endpoint is disabled; enable it first.")
    if outcome is ReplayOutcome.NOT_SUBSCRIBED:
        return ProblemError(
            422,
            "This endpoint does not take this event: its type, channels or filter.",
            kind="not-subscribed",
            errors=[{"pointer": "/endpoint_id", "detail": "does not take the event"}],
        )
    return ProblemError(
        422,
        "No endpoint has this id.",
        errors=[{"pointer": "/endpoint_id", "detail": "no endpoint has this id"}],
    )


@tenant_route(routes, "POST", "/v1/events/{event_id}/replay")
async def replay(request: web.Request) -> web.Response:
    svc = services(request)
    record = await load_event(request, acting=True)
    event_id = record.id
    body = ReplayIn()
    if request.can_read_body:
        body = await read_model(request, ReplayIn, svc.settings.max_payload_bytes)

    async def attempt(version: int | None, out: tuple[str, ...]) -> Replayed:
        return await svc.events.replay(
            event_id,
            body.endpoint_id,
            now_ms(),
            svc.settings.max_attempts,
            int(svc.settings.wakeup_grace * 1000),
            sender=_sender(request),
            filter_version=version,
            filtered_out=out,
        )

    async def replay_now() -> Replayed:
        # By the filters as they are now; ours (operational events) have none, and an
        # expunged payload is refused by the script whatever they say.
        if record.application is None or record.body is None:
            return await attempt(None, ())
        data = orjson.loads(record.body).get("data")
        filtered = FilterEvent(record.type, data, record.channels)
        return await fan_out_filtered(request, record.application, filtered, attempt)

    replayed = await replay_now()
    if replayed.outcome is ReplayOutcome.MISSING and await svc.reviver.restore_event(
        event_id, now_ms()
    ):
        # The event had left Redis; the log had it.
        replayed = await replay_now()
    if replayed.outcome is not ReplayOutcome.OK:
        raise _refusal(replayed.outcome)
    if replayed.pending:
        await svc.waker.wake(replayed.pending, retry=False)
    # Through the history reader: it gives each its event's application.
    records = await svc.history.deliveries(replayed.delivery_ids)
    return web.json_response(
        {
            "event_id": event_id,
            "deliveries": [delivery_json(d) for d in records],
        },
        status=202,
    )


@tenant_route(routes, "DELETE", "/v1/events/{event_id}/payload")
async def expunge_payload(request: web.Request) -> web.Response:
    svc = services(request)
    event_id = (await load_event(request)).id
    sender = _sender(request)
    expunged = await svc.events.expunge_payload(event_id, now_ms(), sender=sender)
    if expunged.outcome is ExpungeOutcome.MISSING and await svc.reviver.restore_event(
        event_id, now_ms()
    ):
        # The event had left Redis; the log had it, and has its body until this ships.
        expunged = await svc.events.expunge_payload(event_id, now_ms(), sender=sender)
    if expunged.outcome is ExpungeOutcome.MISSING:
        raise ProblemError(404, _NO_EVENT)
    return web.Response(status=204)


@tenant_route(routes, "DELETE", "/v1/events/{event_id}/schedule")
async def cancel_schedule(request: web.Request) -> web.Response:
    """End the event's scheduled deliveries not yet attempted (``failed``, last_error
    ``cancelled``: store/states.py says why not a status of their own)."""
    svc = services(request)
    record = await load_event(request)
    sender = _sender(request)
    if sender is not None and record.key_id != sender:
        raise ProblemError(404, _NO_EVENT)  # as replay and expunge answer another's event
    cancelled = await svc.events.cancel_schedule(record.id, now_ms(), sender=sender)
    if cancelled.outcome is not CancelOutcome.CANCELLED:
        # MISSING: the event is in the log alone, every delivery of it ended long ago.
        raise ProblemError(
            409,
            "No delivery of this event is scheduled any more: none was, or each has been "
            "attempted, is being sent or has ended.",
        )
    return web.json_response({"cancelled": cancelled.count})
