"""The API's answers counted by HTTP status, for /metrics (``webhook_http_responses_total``)
and the 5xx and 503 alerts (deploy/prometheus/alerts.yml).

Counted as the workers count their attempts (store/counts.py): in this process's memory,
added to the cluster-wide metrics hash (``http:{code}``, store/telemetry.py) one batch a
``WEBHOOK_COUNTS_INTERVAL`` after the first answer not yet added, and once more when the
app stops. So any API process's scrape shows every process's answers, and an answer costs
no Redis command of its own. A batch the store refuses is kept for the next: while the
store refuses writes (it is full, its disk failed) the 503s it causes reach /metrics only
once it takes them again; the store's own figures (memory, AOF, ``webhook_store_readable``)
are what alert meanwhile.

Probes and scrapes (/healthz, /readyz, /metrics) are left out: a load balancer asks for
/readyz every few seconds, and its 503s while a deployment is unready are no producer's.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from aiohttp import web
from redis.asyncio import Redis

from webhook_service.api.context import Services
from webhook_service.api.problems import Handler
from webhook_service.store.refusals import refused
from webhook_service.store.telemetry import add_response_counts

log = logging.getLogger(__name__)

UNCOUNTED = frozenset({"/healthz", "/readyz", "/metrics"})


class ResponseCounts:
    def __init__(self, redis: Redis, interval: float) -> None:
        self._redis = redis
        self._interval = interval
        self._counts: Counter[int] = Counter()
        self._due: asyncio.TimerHandle | None = None
        self._adding: set[asyncio.Task[None]] = set()

    def note(self, status: int) -> None:
        self._counts[status] += 1
        self._add_later()

    async def add(self) -> None:
        """Add what is counted to Redis now; a batch the store refuses waits for the next."""
        if self._due is not None:
            self._due.cancel()
            self._due = None
        batch, self._counts = self._counts, Counter()
        if not batch:
            return
        try:
            await add_response_counts(self._redis, batch)
        except Exception as exc:
            self._counts.update(batch)
            if not refused(exc, "adding response counts"):
                log.warning("response counts not added; kept for the next try", exc_info=True)
            self._add_later()

    async def close(self) -> None:
        """The app stops: let adds under way end, then add the rest once."""
        if self._adding:
            await asyncio.gather(*self._adding, return_exceptions=True)
        await self.add()
        if self._due is not None:
            # Refused at the very end: nothing is left to try it again.
            self._due.cancel()
            self._due = None

    def _add_later(self) -> None:
        if self._due is None:
            self._due = asyncio.get_running_loop().call_later(self._interval, self._add_soon)

    def _add_soon(self) -> None:
        self._due = None
        task = asyncio.create_task(self.add())
        self._adding.add(task)
        task.add_done_callback(self._adding.discard)


RESPONSE_COUNTS = web.AppKey("response_counts", ResponseCounts)


@web.middleware
async def response_count_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The outermost middleware: it sees the status every other one settled on, a problem
    document's included."""
    if request.path in UNCOUNTED:
        return await handler(request)
    counts = request.config_dict[RESPONSE_COUNTS]
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # a redirect, or a status aiohttp answers itself
        counts.note(exc.status)
        raise
    except asyncio.CancelledError:
        raise  # the client went away: it got no answer to count
    except Exception:
        counts.note(500)  # problem_middleware answers everything; aiohttp's 500 if not
        raise
    counts.note(response.status)
    return response


def setup(app: web.Application, svc: Services) -> None:
    app[RESPONSE_COUNTS] = ResponseCounts(svc.redis, svc.settings.counts_interval)

    async def add_the_rest(app: web.Application) -> None:
        await app[RESPONSE_COUNTS].close()

    # On shutdown, which comes before every cleanup context: the one that closes the Redis
    # client is added after this module's (api/server.py), so it would end first. The API
    # process drains its requests before (api/listener.py), so their answers are counted.
    app.on_shutdown.append(add_the_rest)
