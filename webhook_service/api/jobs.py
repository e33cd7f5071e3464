"""Background jobs: retrying many deliveries (bulk retry by history filter, recovery of an
endpoint's window), and clearing what a deleted application held.

Each answers 202 with a job at once and runs in the background of the API process, a step
at a time, with progress readable at ``GET /v1/jobs/{id}``. A retry's step is a page of the
delivery log by the job's filter, then the retry script for the deliveries on it in the
job's statuses; a deletion's steps are ``Deleter``'s. Jobs live in Redis: any API process
picks up one whose owner died (see ``store/jobs.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import NamedTuple

import redis.exceptions
from aiohttp import web

from webhook_service.api.body import read_model
from webhook_service.api.context import Services, Waker, services
from webhook_service.api.deliveries import delivery_filter
from webhook_service.api.endpoints import load_endpoint
from webhook_service.api.models import RecoverIn, job_json
from webhook_service.api.problems import ProblemError
from webhook_service.api.routing import tenant_route
from webhook_service.api.tenancy import APP_NOT_FOUND, bound_application
from webhook_service.history.database import async_engine
from webhook_service.history.filters import DeliveryFilter
from webhook_service.history.purge import Purger
from webhook_service.history.reader import HistoryReader, LogUnavailable
from webhook_service.history.revive import Reviver
from webhook_service.log_window import LineWindow
from webhook_service.store.apikeys import ApiKeyStore
from webhook_service.store.app_deletion import AppEndArgs, AppEndOutcome, ApplicationDeletion
from webhook_service.store.applications import ApplicationStore
from webhook_service.store.deliveries import DeliveryStore, RetryOutcome
from webhook_service.store.endpoints import EndpointStore
from webhook_service.store.jobs import DeleteStep, JobRecord, JobStore
from webhook_service.store.refusals import refused
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms, parse_iso

log = logging.getLogger(__name__)
routes = web.RouteTableDef()

_LEASE_MS = 30_000
_POLL_SECONDS = 2.0
# A job waiting on something else (the shipper, say) looks again this often.
_WAIT_SECONDS = 0.2
PAGE = 200
# Due entries app_end.lua looks at a call (about 1 ms of Redis for 250 of a 200 000-entry
# due set, ending what is the application's among them); endpoints deleted a step; keys
# SCAN looks at a call. No step holds Redis for more than a few milliseconds.
_DUE_SLICE = 250
_ENDPOINTS_PER_STEP = 20
_KEYS_SLICE = 1000
# API keys read a page while looking for those bound to a deleted application.
_KEYS_PAGE = 200
# While the log's database is away every pass fails alike: one line a minute says so.
_log_away = LineWindow()


class _Stepped(NamedTuple):
    job: JobRecord | None  # None: this process no longer owns it
    waiting: bool = False  # nothing to do until something else happens: try again soon


@dataclasses.dataclass(frozen=True)
class Deleter:
    """The steps of a ``delete-application`` job (store/jobs.py DeleteStep), one call each:

    - CLOSE: the application's record and uid gone (again: the request deleted them, and a
      crash between its two writes would have left them), and every API key bound to it
      revoked, so that nothing acts on it any more.
    - DELIVERIES: its pending deliveries end ``failed`` (``application_deleted``), a slice
      of the due set a call (store/app_deletion.py), each logged to the outbox.
    - ENDPOINTS: its endpoints deleted, with their stats windows; this waits until what
      attempts recorded before the ends counted into those windows is in
      (``settle_ms``, WEBHOOK_COUNTS_INTERVAL twice), so no window comes back after.
    - LOG: waits until the shipper has put every outbox record up to the last one there is
      now into SQL: the ends, and everything before them.
    - HISTORY: its events, deliveries and attempts deleted from the log in batches.
    - KEYS: every key still named after it deleted (idempotency records, its limiter, its
      in-flight and parked lines), one SCAN call at a time.
    """

    jobs: JobStore
    applications: ApplicationStore
    api_keys: ApiKeyStore
    endpoints: EndpointStore
    store: ApplicationDeletion
    purger: Purger
    settle_ms: int

    async def step(self, job: JobRecord) -> _Stepped:
        d = job.deletion
        assert d is not None, job
        now = now_ms()
        if d.step is DeleteStep.CLOSE:
            await self.applications.delete(d.application)
            revoked = await self._revoke_keys(d.application)
            after = dataclasses.replace(d, api_keys=d.api_keys + revoked)
            after = after.advanced(DeleteStep.DELIVERIES, now)
        elif d.step is DeleteStep.DELIVERIES:
            ended = await self.store.end_pending(AppEndArgs(d.application, d.scan, _DUE_SLICE, now))
            counted = dataclasses.replace(d, ended=d.ended + ended.ended)
            if ended.outcome is AppEndOutcome.EXISTS:
                # Its record is back: only CLOSE never having run could explain it.
                after = d.advanced(DeleteStep.CLOSE, now)
            elif ended.outcome is AppEndOutcome.MORE:
                after = dataclasses.replace(counted, scan=ended.cursor)
            else:
                after = counted.advanced(DeleteStep.ENDPOINTS, now)
        elif d.step is DeleteStep.ENDPOINTS:
            if now < d.since_ms + self.settle_ms:
                return _Stepped(job, waiting=True)
            ids = await self.store.endpoints(d.application, _ENDPOINTS_PER_STEP)
            if ids:
                deleted = [await self.endpoints.delete(i) for i in ids].count(True)
                await self.store.forget_windows(ids, now)
                after = dataclasses.replace(d, endpoints=d.endpoints + deleted)
            else:
                mark = await self.store.outbox_mark()
                after = dataclasses.replace(d, mark=mark).advanced(DeleteStep.LOG, now)
        elif d.step is DeleteStep.LOG:
            if not await self.store.shipped(d.mark):
                return _Stepped(job, waiting=True)
            after = d.advanced(DeleteStep.HISTORY, now)
        elif d.step is DeleteStep.HISTORY:
            purged = await self.purger.batch(d.application)
            after = dataclasses.replace(
                d,
                events=d.events + purged.events,
                deliveries=d.deliveries + purged.deliveries,
                attempts=d.attempts + purged.attempts,
            )
            if purged.done:
                after = after.advanced(DeleteStep.KEYS, now)
        else:
            cursor, _ = await self.store.sweep(d.application, int(d.scan), _KEYS_SLICE)
            after = (
                dataclasses.replace(d, scan=str(cursor))
                if cursor
                else d.advanced(DeleteStep.DONE, now)
            )
        return _Stepped(await self.jobs.save_deletion(job, now, after))

    async def _revoke_keys(self, app_id: str) -> int:
        """Every API key bound to the application revoked: how many."""
        revoked, cursor = 0, None
        while True:
            page, cursor = await self.api_keys.page(_KEYS_PAGE, cursor)
            for record in page:
                if record.application == app_id and await self.api_keys.delete(record.id):
                    revoked += 1
            if cursor is None:
                return revoked


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
        deleter: Deleter,
    ) -> None:
        self._jobs = jobs
        self._history = history
        self._reviver = reviver
        self._deliveries = deliveries
        self._waker = waker
        self._grace_ms = grace_ms
        self._deleter = deleter
        self._kick = asyncio.Event()
        self._stopping = False
        # The jobs this process owns, and the token it owns each by: a job that waits
        # keeps it from one pass to the next.
        self._held: dict[str, str] = {}

    def kick(self) -> None:
        self._kick.set()

    def stop(self) -> None:
        """Finish the page at hand, then return. A flag, not Task.cancel(): redis-py can
        swallow a cancellation mid-command, and Python 3.11 ignores any cancel after that."""
        self._stopping = True
        self._kick.set()

    async def run(self) -> None:
        while not self._stopping:
            waiting = False
            try:
                waiting = await self._pass()
            except redis.exceptions.RedisError as exc:
                # A refusal is told once a minute; the next pass (2 s on) carries on.
                if not refused(exc, "running background jobs"):
                    log.warning("jobs paused by a store error; next pass retries", exc_info=True)
            except LogUnavailable as exc:
                if _log_away.admit("log") is not None:
                    log.warning("jobs paused: the delivery log cannot be reached (%s)", exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_WAIT_SECONDS if waiting else _POLL_SECONDS):
                    await self._kick.wait()
            self._kick.clear()
        await self._give_up()

    async def _give_up(self) -> None:
        """Stopping: the jobs this process owns are free for another one at once."""
        for job_id, token in self._held.items():
            with contextlib.suppress(redis.exceptions.RedisError):
                await self._jobs.release(job_id, token)
        self._held.clear()

    async def _pass(self) -> bool:
        """Every running job this process owns or can claim, each as far as it goes now.
        Whether one of them waits (the next pass should come soon)."""
        running = await self._jobs.running()
        self._held = {i: t for i, t in self._held.items() if i in running}
        waiting = False
        for job_id in running:
            token = self._held.get(job_id) or await self._jobs.claim(job_id, _LEASE_MS)
            if token is None:
                continue
            self._held[job_id] = token
            stepped = _Stepped(await self._jobs.get(job_id))
            while (
                stepped.job is not None
                and stepped.job.state == "running"
                and not stepped.waiting
                and not self._stopping
            ):
                stepped = await self._step(stepped.job, token)
            waiting = waiting or stepped.waiting
            if stepped.job is None or stepped.job.state == "done":
                self._held.pop(job_id, None)
        return waiting

    async def _step(self, job: JobRecord, token: str) -> _Stepped:
        """One step of the job (its owner's lease renewed first)."""
        if not await self._jobs.hold(job.id, token, _LEASE_MS):
            return _Stepped(None)
        if job.deletion is not None:
            return await self._deleter.step(job)
        return _Stepped(await self._retry_page(job))

    async def _retry_page(self, job: JobRecord) -> JobRecord:
        """One page of a bulk retry or recovery."""
        query = DeliveryFilter.from_json(job.filter)
        page = await self._history.list_deliveries(query, PAGE, job.cursor)
        # Oldest first (ids start with their event's time): a FIFO endpoint's line takes
        # them in this order, and the log lists each page newest first.
        wanted = sorted(d.id for d in page.items if d.status in job.statuses)
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
    settings = svc.settings
    grace_ms = int(settings.wakeup_grace * 1000)
    # The deletions' own engine, on the primary: the reader's only reads, and may be on a
    # standby (WEBHOOK_LOG_READ_URL), which takes no write; this one writes.
    log_engine = async_engine(settings)
    deleter = Deleter(
        jobs=svc.jobs,
        applications=svc.applications,
        api_keys=svc.api_keys,
        endpoints=svc.endpoints,
        store=ApplicationDeletion(svc.redis, Scripts(svc.redis)),
        purger=Purger(log_engine, settings.log_timeout),
        settle_ms=int(2 * settings.counts_interval * 1000),
    )
    runner = JobRunner(
        svc.jobs, svc.history, svc.reviver, svc.deliveries, svc.waker, grace_ms, deleter
    )
    app[RUNNER] = runner
    running: list[asyncio.Task[None]] = []

    async def start(_: web.Application) -> None:
        running.append(asyncio.create_task(runner.run()))

    # On shutdown, not cleanup: the runner must stop before the Redis client it uses closes.
    async def stop(_: web.Application) -> None:
        runner.stop()
        await asyncio.gather(*running)
        await log_engine.dispose()

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


async def start_deletion(request: web.Request, app_id: str) -> web.Response:
    """Delete the application now (its record and uid: it is gone for every route and for
    ingest at once), and start the job that clears what it held."""
    svc = services(request)
    at = now_ms()
    # The job first, and ours until the record is gone: were this process to die between
    # the two, the job would delete the record once its lease ran out.
    job, token = await svc.jobs.create_deletion(app_id, at, _LEASE_MS)
    if not await svc.applications.delete(app_id):
        # Another request deleted it meanwhile, and its own job clears it.
        assert job.deletion is not None
        await svc.jobs.save_deletion(
            job, at, dataclasses.replace(job.deletion, step=DeleteStep.DONE)
        )
        raise ProblemError(404, APP_NOT_FOUND)
    await svc.jobs.release(job.id, token)
    request.app[RUNNER].kick()
    return web.json_response(job_json(job), status=202, headers={"Location": f"/v1/jobs/{job.id}"})


def _job_application(job: JobRecord) -> str | None:
    """The application a job acts within (None: across every one)."""
    if job.deletion is not None:
        return job.deletion.application
    return DeliveryFilter.from_json(job.filter).application


@routes.get("/v1/jobs/{job_id}")
async def get_job(request: web.Request) -> web.Response:
    job = await services(request).jobs.get(request.match_info["job_id"])
    bound = bound_application(request)
    # A bound key sees the jobs of its own application only.
    if job is None or (bound is not None and _job_application(job) != bound):
        raise ProblemError(404, "No job has this id.")
    return web.json_response(job_json(job))
