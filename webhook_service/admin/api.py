"""The admin HTTP client: every admin action, as one call to the public API.

Shared by the command line and the dashboard, so both go through the API's own
authentication, scopes and validation and never touch Redis behind its back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import orjson
from yarl import URL

from webhook_service.client.attempts import path_segment
from webhook_service.client.errors import APIError, ProblemDetails, TransportError

JSON = dict[str, Any]
Query = Mapping[str, str | int | None]
# A bulk job is polled this often; its progress is written to Redis a page at a time.
JOB_POLL_SECONDS = 0.5

# The history filters of GET /v1/deliveries (and of the bulk retry, which takes the first six).
DELIVERY_FILTERS = (
    "endpoint_id", "event_id", "status", "event_type", "since", "until",
    "status_class", "attempts_min", "attempts_max",
)  # fmt: skip
BULK_RETRY_FILTERS = DELIVERY_FILTERS[:6]


def _segment(value: str) -> str:
    # Ids come from people and URLs: never let one add a path segment or a query, or be
    # dots that step out of the application (/v1/applications/../endpoints).
    return path_segment(value)


def clean_query(query: Query | None) -> dict[str, str]:
    """Unset and empty parameters are left out: an empty form field means "any"."""
    return {k: str(v) for k, v in (query or {}).items() if v is not None and v != ""}


class AdminApi:
    """One API key against one API base URL; methods return the API's JSON as parsed.

    ``application`` (an id or a uid): the endpoint, event and delivery methods use the
    routes nested under it (``/v1/applications/{app}/…``). None: the flat routes, which act
    on the default application (a bound key: on its own) and, for the history lists and the
    bulk retry, on every application the key may see.

    Errors: ``APIError`` carrying the problem document for any 4xx/5xx, ``TransportError``
    when the API cannot be reached.
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        key: str,
        *,
        timeout: float = 30.0,
        application: str | None = None,
    ) -> None:
        self._session = session
        self._base = base_url.rstrip("/")
        self._key = key
        self._headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
        self._seconds = timeout
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        # The application this client acts in, as given (an id or a uid); None: flat routes.
        self.app = application
        # Where the subscriber routes start: /v1/endpoints… or /v1/applications/{app}/endpoints…
        self._here = "/v1" if application is None else f"/v1/applications/{_segment(application)}"

    @property
    def base_url(self) -> str:
        return self._base

    def within(self, application: str | None) -> AdminApi:
        """The same client on ``application``'s nested routes (None: the flat ones)."""
        return AdminApi(
            self._session, self._base, self._key, timeout=self._seconds, application=application
        )

    async def _send(
        self, method: str, path: str, query: Query | None, body: JSON | None
    ) -> tuple[int, bytes]:
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        try:
            # Encoded as it is: yarl would resolve a segment of dots (%2E%2E) away.
            async with self._session.request(
                method,
                URL(self._base + path, encoded=True),
                params=clean_query(query),
                data=data,
                headers=headers,
                timeout=self._timeout,
                allow_redirects=False,
            ) as response:
                return response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"cannot reach the API at {self._base}: {exc}") from exc

    @staticmethod
    def _object(raw: bytes) -> JSON:
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            raise TransportError("the API answered with something that is not a JSON object")
        return body

    async def call(
        self, method: str, path: str, *, query: Query | None = None, body: JSON | None = None
    ) -> JSON:
        status, raw = await self._send(method, path, query, body)
        if status >= 400:
            raise APIError(ProblemDetails.parse(status, raw))
        return self._object(raw)

    # Applications

    async def applications(
        self, limit: int = 50, cursor: str | None = None, uid: str | None = None
    ) -> JSON:
        query = {"limit": limit, "cursor": cursor, "uid": uid}
        return await self.call("GET", "/v1/applications", query=query)

    async def application(self, app: str) -> JSON:
        return await self.call("GET", f"/v1/applications/{_segment(app)}")

    async def create_application(self, fields: JSON) -> JSON:
        return await self.call("POST", "/v1/applications", body=fields)

    async def update_application(self, app: str, fields: JSON) -> JSON:
        return await self.call("PATCH", f"/v1/applications/{_segment(app)}", body=fields)

    async def delete_application(self, app: str) -> JSON:
        """The job that deletes its endpoints, ends its pending deliveries and expunges its
        history in the background."""
        return await self.call("DELETE", f"/v1/applications/{_segment(app)}")

    # Portal links: of ``application`` (None: the flat route, the default application's
    # or a bound key's own)

    async def portal_link(
        self, expires_in: int | None, capabilities: Sequence[str] | None, read_only: bool
    ) -> JSON:
        """A subscriber portal link: {url, token, expires_at, capabilities}; None leaves a
        field to the API's default (an hour; every capability but view_secrets)."""
        body: JSON = {"read_only": read_only}
        if expires_in is not None:
            body["expires_in"] = expires_in
        if capabilities is not None:
            body["capabilities"] = list(capabilities)
        return await self.call("POST", self._here + "/portal-access", body=body)

    async def revoke_portal_links(self) -> None:
        """End every portal link and every portal session of the application at once."""
        await self.call("DELETE", self._here + "/portal-access")

    async def may_make_portal_links(self) -> bool:
        """Whether this key may make the application's portal links (applications:write,
        or bound to it), asked without making one: a request the API refuses as invalid
        (422) is past its scope and tenancy checks (403, 404), and makes nothing."""
        try:
            await self.call("POST", self._here + "/portal-access", body={"expires_in": 0})
        except APIError as exc:
            if exc.status in (403, 404):
                return False
            if exc.status != 422:
                raise
        return True

    # The event-type catalog (global: the same whatever ``application``)

    async def event_types(
        self,
        limit: int = 50,
        cursor: str | None = None,
        *,
        include_archived: bool = False,
        group: str | None = None,
    ) -> JSON:
        query = {"limit": limit, "cursor": cursor, "group": group}
        if include_archived:
            query["include_archived"] = "true"
        return await self.call("GET", "/v1/event-types", query=query)

    async def event_type(self, name: str) -> JSON:
        return await self.call("GET", f"/v1/event-types/{_segment(name)}")

    async def create_event_type(self, fields: JSON) -> JSON:
        return await self.call("POST", "/v1/event-types", body=fields)

    async def update_event_type(self, name: str, fields: JSON) -> JSON:
        return await self.call("PATCH", f"/v1/event-types/{_segment(name)}", body=fields)

    async def archive_event_type(self, name: str) -> JSON:
        return await self.call("DELETE", f"/v1/event-types/{_segment(name)}")

    async def import_event_types(self, document: JSON) -> JSON:
        """An OpenAPI 3.1 document's webhooks into the catalog: created, updated, unchanged,
        errors."""
        return await self.call("POST", "/v1/event-types/import", body=document)

    # Endpoints

    def _endpoint(self, endpoint_id: str, action: str | None = None) -> str:
        path = f"{self._here}/endpoints/{_segment(endpoint_id)}"
        return path if action is None else f"{path}/{action}"

    async def endpoints(self, limit: int = 50, cursor: str | None = None) -> JSON:
        return await self.call(
            "GET", self._here + "/endpoints", query={"limit": limit, "cursor": cursor}
        )

    async def all_endpoints(self) -> list[JSON]:
        found: list[JSON] = []
        cursor = None
        while True:
            page = await self.endpoints(250, cursor)
            found.extend(page["data"])
            cursor = page["next_cursor"]
            if cursor is None:
                return found

    async def endpoint(self, endpoint_id: str) -> JSON:
        return await self.call("GET", self._endpoint(endpoint_id))

    async def create_endpoint(self, fields: JSON) -> JSON:
        return await self.call("POST", self._here + "/endpoints", body=fields)

    async def update_endpoint(self, endpoint_id: str, fields: JSON) -> JSON:
        return await self.call("PATCH", self._endpoint(endpoint_id), body=fields)

    async def delete_endpoint(self, endpoint_id: str) -> None:
        await self.call("DELETE", self._endpoint(endpoint_id))

    async def secret(self, endpoint_id: str) -> JSON:
        return await self.call("GET", self._endpoint(endpoint_id, "secret"))

    async def send_example(self, endpoint_id: str, event_type: str) -> JSON:
        """One event of ``event_type`` (its catalog example) to this endpoint alone:
        {event_id, delivery_id}."""
        path = self._endpoint(endpoint_id, "send-example")
        return await self.call("POST", path, body={"event_type": event_type})

    async def test_filter(self, endpoint_id: str, event: JSON) -> JSON:
        """Whether the endpoint's filter passes ``event`` ({type, data, channels}):
        {matches, decided_by, clause}."""
        return await self.call("POST", self._endpoint(endpoint_id, "test-filter"), body=event)

    async def set_enabled(self, endpoint_id: str, enabled: bool) -> JSON:
        action = "enable" if enabled else "disable"
        return await self.call("POST", self._endpoint(endpoint_id, action))

    async def rotate_secret(self, endpoint_id: str, grace_period_seconds: int | None) -> JSON:
        body = (
            {} if grace_period_seconds is None else {"grace_period_seconds": grace_period_seconds}
        )
        path = self._endpoint(endpoint_id, "rotate-secret")
        return await self.call("POST", path, body=body)

    async def recover(self, endpoint_id: str, since: str, until: str | None) -> JSON:
        path = self._endpoint(endpoint_id, "recover")
        return await self.call("POST", path, body={"since": since, "until": until})

    async def stats(self, endpoint_id: str) -> JSON:
        return await self.call("GET", self._endpoint(endpoint_id, "stats"))

    async def stats_for(self, endpoints: Sequence[JSON], concurrency: int = 8) -> list[JSON]:
        """Each endpoint's stats, in order, a few requests at a time."""
        gate = asyncio.Semaphore(concurrency)

        async def one(endpoint: JSON) -> JSON:
            async with gate:
                return await self.stats(endpoint["id"])

        return list(await asyncio.gather(*(one(e) for e in endpoints)))

    # Events

    async def events(self, query: Query) -> JSON:
        return await self.call("GET", self._here + "/events", query=query)

    async def event(self, event_id: str) -> JSON:
        return await self.call("GET", f"{self._here}/events/{_segment(event_id)}")

    async def replay(self, event_id: str, endpoint_id: str | None) -> JSON:
        path = f"{self._here}/events/{_segment(event_id)}/replay"
        return await self.call("POST", path, body={"endpoint_id": endpoint_id})

    # Deliveries and jobs

    async def deliveries(self, query: Query) -> JSON:
        return await self.call("GET", self._here + "/deliveries", query=query)

    async def delivery(self, delivery_id: str) -> JSON:
        return await self.call("GET", f"{self._here}/deliveries/{_segment(delivery_id)}")

    async def retry(self, delivery_id: str) -> JSON:
        return await self.call("POST", f"{self._here}/deliveries/{_segment(delivery_id)}/retry")

    async def bulk_retry(self, query: Query) -> JSON:
        return await self.call("POST", self._here + "/deliveries/retry", query=query)

    async def job(self, job_id: str) -> JSON:
        return await self.call("GET", f"/v1/jobs/{_segment(job_id)}")

    async def wait_for_job(
        self, job: JSON, on_progress: Callable[[JSON], None], every: float = JOB_POLL_SECONDS
    ) -> JSON:
        """Poll the job until it is done, reporting each state seen (the first included)."""
        on_progress(job)
        while job["state"] != "done":
            await asyncio.sleep(every)
            job = await self.job(job["id"])
            on_progress(job)
        return job

    async def readiness(self) -> JSON:
        """The /readyz body, ready (200) or not (503): both answers name every check."""
        status, raw = await self._send("GET", "/readyz", None, None)
        if status not in (200, 503):
            raise APIError(ProblemDetails.parse(status, raw))
        return self._object(raw)


@asynccontextmanager
async def connect(
    base_url: str, key: str, *, request_timeout: float = 30.0, application: str | None = None
) -> AsyncIterator[AdminApi]:
    """A client with a session of its own, for the command line."""
    async with aiohttp.ClientSession() as session:
        yield AdminApi(session, base_url, key, timeout=request_timeout, application=application)
