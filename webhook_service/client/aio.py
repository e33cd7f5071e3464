"""The asyncio producer client, on one aiohttp session."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import aiohttp
from yarl import URL

from webhook_service.client.attempts import (
    Accepted,
    Attempts,
    Backoff,
    ClientBase,
    Headers,
    PreparedRequest,
    Schedule,
    Step,
)
from webhook_service.client.errors import TransportError
from webhook_service.client.portal_links import PortalLink, portal_link_of, portal_link_request


class AsyncWebhookClient(ClientBase):
    """``await send(...)`` returns the event id once stored, or raises a typed error.

    Use it as ``async with`` or call ``close()``; a session passed in is left open.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        backoff: Backoff | None = None,
        session: aiohttp.ClientSession | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(base_url, api_key, backoff)
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session = session
        self._owns_session = session is None
        self._sleep = sleep

    async def send(
        self,
        app: str,
        event_type: str,
        data: Mapping[str, Any],
        idempotency_key: str | None = None,
        *,
        channels: Sequence[str] | None = None,
        create_as: str | None = None,
        schedule: Schedule | None = None,
    ) -> str:
        """Send to the application ``app``, its id (``app_…``) or its uid (the default
        application's is ``"default"``). ``channels``: only its endpoints listing one of them,
        or listing none, receive it. ``create_as``: the name to create ``app`` (a uid) with if
        it does not exist; without it a missing application is ``InvalidEvent`` (404).
        ``schedule``: when its deliveries are due (default: at once)."""
        attempts = self._attempts(
            app, event_type, data, idempotency_key, channels, create_as, schedule
        )
        while not isinstance(step := await self._try(attempts), Accepted):
            await self._sleep(step.seconds)
        return step.event_id

    async def portal_link(
        self,
        app: str,
        *,
        expires_in: int | None = None,
        capabilities: Iterable[str] | None = None,
        read_only: bool = False,
    ) -> PortalLink:
        """A link to ``app``'s subscriber portal (the key needs applications:write, or to be
        bound to ``app``). Asked once: see client/portal_links.py."""
        request = portal_link_request(
            self._base_url, self._api_key, app, expires_in, capabilities, read_only
        )
        try:
            status, _, body = await self._post(request)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"could not reach {request.url}: {exc!r}") from exc
        return portal_link_of(status, body)

    async def _try(self, attempts: Attempts) -> Step:
        try:
            status, headers, body = await self._post(attempts.request)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return attempts.failed(exc)
        return attempts.answered(status, headers, body)

    async def _post(self, request: PreparedRequest) -> tuple[int, Headers, bytes]:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        # Encoded as it is: left to yarl, a uid of dots (%2E%2E) would be resolved away.
        url = URL(request.url, encoded=True)
        async with self._session.post(
            url, data=request.body, headers=request.headers, timeout=self._timeout
        ) as response:
            return response.status, response.headers, await response.read()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> AsyncWebhookClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
