"""POST /v1/events: ingest (reading events back is api/event_history.py)."""

from __future__ import annotations

import logging
import math
from functools import partial
from typing import Any

import orjson
from aiohttp import web

from webhook_service import tracing
from webhook_service.api.auth import CALLER, CALLER_KEY_ID
from webhook_service.api.body import read_json, read_model, validate
from webhook_service.api.context import services
from webhook_service.api.endpoint_filters import fan_out_filtered
from webhook_service.api.endpoints import ENDPOINT_NOT_FOUND, load_endpoint
from webhook_service.api.event_types import CATALOG
from webhook_service.api.idempotency import (
    HEADER,
    REPLAYED_HEADER,
    fingerprint,
    outcome_problem,
    validate_key,
)
from webhook_service.api.models import EventIn, ExampleIn
from webhook_service.api.problems import ProblemError
from webhook_service.api.routing import tenant_route
from webhook_service.api.scheduling import deliver_at_ms
from webhook_service.api.tenancy import bound_application, not_found, path_application
from webhook_service.api.validation import check_event
from webhook_service.filters import FilterEvent
from webhook_service.ids import mark_of, new_id
from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store import keys
from webhook_service.store.applications import (
    DEFAULT_APP_ID,
    DEFAULT_APP_UID,
    DEFAULT_APPLICATION,
    NewApplication,
    is_app_id,
    new_app_id,
)
from webhook_service.store.events import Accepted, IdempotencyClaim, IngestOutcome
from webhook_service.timeutil import iso, now_ms

log = logging.getLogger(__name__)
routes = web.RouteTableDef()

# How long a strict-mode request may hold its idempotency key before others may replay it.
_IN_FLIGHT_MS = 10_000
# The backlog drains a batch at a time once the log's database is back (thousands of records
# a second); a producer asking again sooner only adds requests to refuse.
_BACKLOG_RETRY_AFTER = "5"


def _accepted(
    event_id: str,
    application: str,
    event_type: str,
    created_ms: int,
    fanout: int,
    deliver_at: int | None,
) -> dict[str, Any]:
    return {
        "id": event_id,
        "application": application,
        "type": event_type,
        "timestamp": iso(created_ms),
        "deliveries": fanout,
        "deliver_at": None if deliver_at is None else iso(deliver_at),
    }


async def _destination(request: web.Request, event: EventIn) -> tuple[str, NewApplication | None]:
    """The application the event goes to, and the one to create with it if it is missing.
    An id in the path is checked by the ingest script itself (no round trip here); a uid is
    looked up, and a missing one is created only when the event says how to name it."""
    raw = path_application(request)
    bound = bound_application(request)
    if raw is None:
        home = bound or DEFAULT_APP_ID
        return home, DEFAULT_APPLICATION if home == DEFAULT_APP_ID else None
    if raw in (DEFAULT_APP_ID, DEFAULT_APP_UID) and bound in (None, DEFAULT_APP_ID):
        # Made on its first use, as by the flat route.
        return DEFAULT_APP_ID, DEFAULT_APPLICATION
    app_id: str | None = raw
    if not is_app_id(raw):
        app_id = await services(request).applications.id_of_uid(raw)
        if app_id is None and event.application is not None and bound is None:
            created = NewApplication(new_app_id(now_ms(), raw), raw, event.application.name)
            return created.id, created
    if app_id is None or (bound is not None and app_id != bound):
        raise not_found()
    return app_id, None


@tenant_route(routes, "POST", "/v1/events")
async def post_event(request: web.Request) -> web.Response:
    # An invalid traceparent is dropped, not refused: tracing must never cost an event.
    traceparent = tracing.valid_traceparent(request.headers.get(tracing.TRACEPARENT))
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else request.path
    with tracing.ingest_span(request.method, route, traceparent) as span:
        try:
            response, outcome = await _post_event(
                request,
                # With none from the producer, its attempts link to this span instead.
                traceparent or tracing.traceparent_of(span.get_span_context()),
            )
        except ProblemError as exc:
            tracing.answered(span, exc.status, exc.kind)
            raise
        tracing.answered(span, response.status, outcome)
        return response


async def _post_event(
    request: web.Request, traceparent: str | None
) -> tuple[web.Response, IngestOutcome]:
    svc = services(request)
    idem_key = validate_key(request.headers.get(HEADER))
    # Before the body is read: a request that will be refused still costs its sender a
    # token, so a limited key cannot spend the API's CPU on bodies it knows are invalid.
    await _within_rate_limit(request)
    parsed, _ = await read_json(request, svc.settings.max_payload_bytes)
    event = validate(EventIn, parsed)
    app_id, create_app = await _destination(request, event)
    now = now_ms()
    deliver_at = deliver_at_ms(event, now)
    claim = None
    if idem_key is not None:
        claim = IdempotencyClaim(
            key_id=request[CALLER_KEY_ID],
            key=idem_key,
            fingerprint=fingerprint(parsed),
            ttl_s=svc.settings.idempotency_ttl,
            state="in_flight" if svc.strict is not None else "done",
            until_ms=now + _IN_FLIGHT_MS,
        )
    accepted = await _accept(
        request, now, app_id, event.type, event.data, claim=claim, create_app=create_app,
        channels=tuple(event.channels or ()), deliver_at=deliver_at, traceparent=traceparent,
    )  # fmt: skip
    reply = _accepted(
        accepted.event_id, app_id, accepted.event_type, accepted.created_ms, accepted.fanout,
        # A repeat's is its first request's: the same body, from the time that one was taken.
        deliver_at_ms(event, accepted.created_ms),
    )  # fmt: skip
    if accepted.outcome is IngestOutcome.REPLAY:
        # The first request's event: its id, the one this span names.
        tracing.note(event_id=accepted.event_id)
        return _json_202(reply, {REPLAYED_HEADER: "true"}), accepted.outcome
    await _stored(request, accepted, app_id, claim)
    return _json_202(reply), accepted.outcome


@tenant_route(routes, "POST", "/v1/endpoints/{endpoint_id}/send-example")
async def send_example(request: web.Request) -> web.Response:
    """One event of a catalog type, to this one endpoint alone (whatever types and
    channels it takes), marked as an example: how a subscriber sees its endpoint receive
    and verify what it will get."""
    svc = services(request)
    await _within_rate_limit(request)
    endpoint = await load_endpoint(svc, request)
    example = await read_model(request, ExampleIn, svc.settings.max_payload_bytes)
    if endpoint.disabled:
        raise ProblemError(
            409, "The endpoint is disabled: enable it to send it an example.", kind="conflict"
        )
    data = example.data
    if data is None:
        data = await _catalog_example(request, example.event_type)
    accepted = await _accept(
        request, now_ms(), endpoint.application, example.event_type, data,
        only_endpoint=endpoint.id,
    )  # fmt: skip
    await _stored(request, accepted, endpoint.application, None)
    return _json_202({"event_id": accepted.event_id, "delivery_id": accepted.deliveries[0]})


async def _catalog_example(request: web.Request, event_type: str) -> dict[str, Any]:
    found = await request.app[CATALOG].get(event_type)
    if found is None or found.archived:
        raise ProblemError(
            422,
            "The event-type catalog has no such type: name one of it, or send data.",
            errors=[{"pointer": "/event_type", "detail": "not in the catalog"}],
        )
    if not found.examples:
        raise ProblemError(
            422,
            "This type has no example in the catalog: send data.",
            errors=[{"pointer": "/data", "detail": "required: the type has no example"}],
        )
    return found.examples[0]


async def _accept(
    request: web.Request,
    now: int,
    app_id: str,
    event_type: str,
    data: dict[str, Any],
    *,
    claim: IdempotencyClaim | None = None,
    create_app: NewApplication | None = None,
    channels: tuple[str, ...] = (),
    only_endpoint: str | None = None,
    deliver_at: int | None = None,
    traceparent: str | None = None,
) -> Accepted:
    """The ingest step for one event, past every refusal it may meet (each a problem).
    ``traceparent``: a valid W3C one, kept with the event (tracing.py)."""
    svc = services(request)
    if event_type in OPERATIONAL_EVENT_TYPES:
        raise ProblemError(
            422,
            "This event type is reserved for the service's own operational events.",
            errors=[{"pointer": "/type", "detail": f"{event_type} is reserved"}],
        )
    event_id = new_id("msg", now, mark=mark_of(app_id))  # of its application's bucket
    tracing.note(event_id=event_id, event_type=event_type, application=app_id)
    await check_event(request, event_id, event_type, data)
    body = orjson.dumps({"type": event_type, "timestamp": iso(now), "data": data}).decode()
    accept = partial(
        svc.events.accept,
        app_id=app_id,
        create_app=create_app,
        channels=channels,
        event_id=event_id,
        event_type=event_type,
        body=body,
        key_id=request[CALLER_KEY_ID],
        now_ms=now,
        budget=svc.settings.max_attempts,
        grace_ms=int(svc.settings.wakeup_grace * 1000),
        idempotency=claim,
        # Strict mode wakes workers only once the event is on disk, from here.
        wakeup=None if svc.strict is not None else svc.waker.inline,
        backlog_max=svc.settings.log_backlog_max,
        only_endpoint=only_endpoint,
        deliver_at_ms=deliver_at,
        traceparent=traceparent,
    )
    if only_endpoint is not None:
        accepted = await accept()  # an example reaches its endpoint, whatever its filter
    else:
        filtered = FilterEvent(event_type, data, channels)
        accepted = await fan_out_filtered(
            request,
            app_id,
            filtered,
            lambda version, out: accept(filter_version=version, filtered_out=out),
        )
    if accepted.outcome is IngestOutcome.BACKLOG_FULL:
        raise _backlog_full(svc.settings.log_backlog_max)
    if accepted.outcome is IngestOutcome.NO_APP:
        raise not_found()
    if accepted.outcome is IngestOutcome.NO_ENDPOINT:  # deleted since it was read
        raise ProblemError(404, ENDPOINT_NOT_FOUND)
    if accepted.outcome is IngestOutcome.THROTTLED:
        raise _throttled(
            "This application is over its rate_limit; retry after the given delay.",
            accepted.retry_after_ms / 1000,
        )
    problem = outcome_problem(accepted.outcome)
    if problem is not None:
        raise problem
    return accepted


async def _stored(
    request: web.Request, accepted: Accepted, app_id: str, claim: IdempotencyClaim | None
) -> None:
    """A new event is in: on disk first in strict mode, then its deliveries' wake-ups."""
    svc = services(request)
    if svc.strict is not None:
        if not await svc.strict.confirm(keys.bucket_of(app_id)):
            raise _unconfirmed()
        if claim is not None:
            await svc.events.settle_idempotency(claim, app_id=app_id)
    if accepted.delivery_ids and not accepted.woken:
        await svc.waker.wake(accepted.delivery_ids, retry=False)


def _backlog_full(backlog_max: int) -> ProblemError:
    return ProblemError(
        503,
        "The delivery log's database is behind: Redis holds as many log records waiting "
        f"for it as it may (WEBHOOK_LOG_BACKLOG_MAX, {backlog_max}). Nothing was stored; "
        "retry after Retry-After. Deliveries already accepted go on.",
        kind="log-backlog-full",
        headers={"Retry-After": _BACKLOG_RETRY_AFTER},
    )


def _json_202(reply: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    # orjson rather than json_response's json.dumps: the ingest answer is the hot one.
    return web.Response(
        body=orjson.dumps(reply), status=202, content_type="application/json", headers=headers
    )


async def _within_rate_limit(request: web.Request) -> None:
    """The caller's key's ingest limit: every request counts, valid or not."""
    rate = request[CALLER].rate_limit
    if rate is None:
        return
    # A burst of one second's worth: a producer may flush a small backlog at once.
    name = f"apikey:{request[CALLER_KEY_ID]}"
    wait = await services(request).limiter.acquire(name, rate, max(1, math.floor(rate)))
    if wait > 0:
        raise _throttled(
            f"This API key may send {rate:g} events per second; retry after the given delay.", wait
        )


def _throttled(detail: str, wait_s: float) -> ProblemError:
    return ProblemError(
        429,
        detail,
        kind="rate-limited",
        headers={"Retry-After": str(max(1, math.ceil(wait_s)))},
    )


def _unconfirmed() -> ProblemError:
    return ProblemError(
        503,
        "The event was written but not yet confirmed on disk; retry with the same "
        f"{HEADER} to learn its fate.",
        kind="durability-timeout",
        headers={"Retry-After": "1"},
    )
