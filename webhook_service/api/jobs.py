"""Retrying many deliveries: bulk retry by history filter, recovery of an endpoint's window.

Both answer 202 with a job at once and run in the background of the API process, a page at
a time, with progress readable at ``GET /v1/jobs/{id}``: a page of the delivery log by the
job's filter, then the retry script for the deliveries on it in the job's statuses. Jobs
live in Redis: any API process picks up one whose owner died (see ``store/jobs.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis.exceptions
from aiohttp import web

from webhook_service.api.body import read_model
from webhook_service.api.context import Services, Waker, services
from webhook_service.api.deliveries import delivery_filter
from webhook_service.api.endpoints import load_endpoint
from webhook_service.api.models import RecoverIn, job_json
from webhook_service.api.problems import ProblemError
from webhook_service.api.routing import tenant_route
from webhook_service.api.tenancy import bound_application
from webhook_service.history.filters import DeliveryFilter
from webhook_service.history.reader import HistoryReader, LogUnavailable
from webhook_service.history.revive import Reviver
from webhook_service.log_window import LineWindow
from webhook_service.store.deliveries import DeliveryStore, RetryOutcome
from webhook_service.store.jobs import JobRecord, JobStore
from webhook_service.store.refusals import refused
from webhook_service.timeutil import now_ms, parse_iso

log = logging.getLogger(__name__)
routes = web.RouteTableDef()

_LEASE_MS = 30_000
_POLL_SECONDS = 2.0
PAGE = 200
# While the log's database is away every pass fails alike: one line a minute says so.
_log_away = LineWindow()


class JobRunner:
    """Works on every running job this process can claim; woken at once by a new job."""

    def __init__(
        self,
        jobs: JobStore,
        history: HistoryReader,
        reviver: Reviver,
        deliveries: DeliveryStore,
        waker: Waker,
        grace_ms: int,
    ) -> None:
        self._jobs = jobs
        self._history = history
        self._reviver = reviver
        self._deliveries = deliveries
        self._waker = waker
        self._grace_ms = grace_ms
        self._kick = asyncio.Event()
        self._stopping = False

    def kick(self) -> None:
        self._kick.set()

    def stop(self) -> None:
        """Finish the page at hand, then return. A flag, not Task.cancel(): redis-py can
        swallow a cancellation mid-command, and Python 3.11 ignores any cancel after that."""
        self._stopping = True
        self._kick.set()

    async def run(self) -> None:
        while not self._stopping:
            try:
                await self._pass()
            except redis.exceptions.RedisError as exc:
                # A refusal is told once a minute; the next pass (2 s on) carries on.
                if not refused(exc, "running background jobs"):
                    log.warning("jobs paused by a store error; next pass retries", exc_info=True)
            except LogUnavailable as exc:
                if _log_away.admit("log") is not None:
                    log.warning("jobs paused: the delivery log cannot be read (%s)", exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_POLL_SECONDS):
                    await self._kick.wait()
            self._kick.clear()

    async def _pass(self) -> None:
        for job_id in await self._jobs.running():
            token = await self._jobs.claim(job_id, _LEASE_MS)
            job = await self._jobs.get(job_id) if token else None
            while token and job is not None and job.state == "running" and not self._stopping:
                job = await self._step(job, token)

    async def _step(self, job: JobRecord, token: str) -> JobRecord | None:
        """One page of the job, or None if this process no longer owns it."""
        if not await self._jobs.hold(job.id, token, _LEASE_MS):
            return None
        query = DeliveryFilter.from_json(job.filter)
        page = await self._history.list_deliveries(query, PAGE, job.cursor)
        wanted = [d.id for d in page.items if d.status in job.statuses]
        at = now_ms()
        outcomes = await self._reviver.retry(self._deliveries, wanted, at, self._grace_ms)
        retried = [
            i for i, outcome in zip(wanted, outcomes, strict=True) if outcome is RetryOutcome.OK
        ]
        after = await self._jobs.save(
            job, at, matched=len(wanted), retried=len(retried), cursor=page.next_cursor
        )
        if retried:
            await self._waker.wake(retried, retry=True)
        return after


RUNNER = web.AppKey("job_runner", JobRunner)


def setup(app: web.Application, svc: Services) -> None:
    grace_ms = int(svc.settings.wakeup_grace * 1000)
    runner = JobRunner(svc.jobs, svc.history, svc.reviver, svc.deliveries, svc.waker, grace_ms)
    app[RUNNER] = runner
    running: list[asyncio.Task[None]] = []

    async def start(_: web.Application) -> None:
        running.append(asyncio.create_task(runner.run()))

    # On shutdown, not cleanup: the runner must stop before the Redis client it uses closes.
    async def stop(_: web.Application) -> None:
        runner.stop()
        await asyncio.gather(*running)

    app.on_startup.append(start)
    app.on_shutdown.append(stop)


async def _start(
    request: web.Request, kind: str, query: DeliveryFilter, statuses: tuple[str, ...]
) -> web.Response:
    job: JobRecord = await services(request).jobs.create(
        "retry" if kind == "retry" else "recover", query.to_json(), statuses, now_ms()
    )
    request.app[RUNNER].kick()
    return web.json_response(job_json(job), status=202, headers={"Location": f"/v1/jobs/{job.id}"})


@tenant_route(routes, "POST", "/v1/deliveries/retry")
async def bulk_retry(request: web.Request) -> web.Response:
    query = await delivery_filter(request)
    # Without a status, what needs a retry is what failed; succeeded ones are re-sent only
    # when asked for by name, and pending ones are on their way already.
    status = query.status or "failed"
    if status == "pending":
        raise ProblemError(
            422,
            "Pending deliveries are on their way already.",
            errors=[{"pointer": "#/query/status", "detail": "failed, disabled or succeeded"}],
        )
    return await _start(request, "retry", query, (status,))


@tenant_route(routes, "POST", "/v1/endpoints/{endpoint_id}/recover")
async def recover(request: web.Request) -> web.Response:
    svc = services(request)
    endpoint = await load_endpoint(svc, request)
    endpoint_id = endpoint.id
    body = await read_model(request, RecoverIn, svc.settings.max_payload_bytes)
    since = parse_iso(body.since)
    until = parse_iso(body.until) if body.until else now_ms()
    if until < since:
        raise ProblemError(
            422, "The window ends before it starts.",
            errors=[{"pointer": "/until", "detail": "not before since"}],
        )  # fmt: skip
    query = DeliveryFilter(
        application=endpoint.application, endpoint_id=endpoint_id, since_ms=since, until_ms=until
    )
    return await _start(request, "recover", query, ("failed", "disabled"))


@routes.get("/v1/jobs/{job_id}")
async def get_job(request: web.Request) -> web.Response:
    job = await services(request).jobs.get(request.match_info["job_id"])
    bound = bound_application(request)
    # A bound key sees the jobs of its own application only: those its filter stays within.
    if job is None or (
        bound is not None and DeliveryFilter.from_json(job.filter).application != bound
    ):
        raise ProblemError(404, "No job has this id.")
    return web.json_response(job_json(job))
