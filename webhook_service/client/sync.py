"""The blocking producer client, on the standard library alone (urllib)."""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

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


class WebhookClient(ClientBase):
    """``send`` blocks until the event is stored (its id returned) or a typed error is raised.

    Safe to share between threads: it holds no connection, only settings.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        backoff: Backoff | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(base_url, api_key, backoff)
        self._timeout = timeout
        self._sleep = sleep

    def send(
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
        while not isinstance(step := self._try(attempts), Accepted):
            self._sleep(step.seconds)
        return step.event_id

    def portal_link(
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
            status, _, body = self._post(request)
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(f"could not reach {request.url}: {exc!r}") from exc
        return portal_link_of(status, body)

    def _try(self, attempts: Attempts) -> Step:
        try:
            status, headers, body = self._post(attempts.request)
        except (OSError, http.client.HTTPException) as exc:  # URLError is an OSError
            return attempts.failed(exc)
        return attempts.answered(status, headers, body)

    def _post(self, request: PreparedRequest) -> tuple[int, Headers, bytes]:
        sent = urllib.request.Request(  # noqa: S310 - service_url admits http(s) only
            request.url, data=request.body, headers=dict(request.headers), method="POST"
        )
        try:
            with urllib.request.urlopen(sent, timeout=self._timeout) as response:  # noqa: S310
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as answer:
            # urllib raises for every status >= 400; for us they are answers like any other.
            with answer:
                return answer.code, answer.headers, answer.read()
