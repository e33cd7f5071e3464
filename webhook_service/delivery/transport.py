"""The whole outbound HTTP seam: one small interface, one real transport, one mock.

The engine only ever sees ``Transport.send``: it never raises, it answers with what the
receiver said or with an error class, so every failure becomes a recorded attempt.

Receivers are outsiders, and some are hostile (tests/chaos/test_hostile_receivers.py): an
attempt ends by one deadline whatever the receiver does, and holds no more of its answer
than the bounded headers and the part of the body we keep.

With an egress proxy (WEBHOOK_EGRESS_PROXY) every send goes through it: plain http as an
absolute-form request to the proxy, https as a CONNECT tunnel with TLS to the receiver
inside. The proxy resolves the receiver's name itself, so before anything is sent we
resolve it too and refuse the send unless every address passes the SSRF guard.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDict
from yarl import URL

from webhook_service.delivery.ssrf import DestinationBlocked, Guard, GuardedResolver, blocked_reason

USER_AGENT = "webhook-service/0.1"  # the engine sends it, so an attempt's record shows it
# Bounds on a receiver's answer headers. aiohttp's defaults (8 190 bytes a line, 128 lines)
# let 1 MB of headers through: parsed, decoded and copied, that held 1.5-1.8 MiB of the
# sender per attempt (tests/unit/delivery/test_transport_hostile.py). Receivers send a
# handful to twenty; a line over 8 190 bytes or more than 32 lines is refused as
# `invalid_response`, having cost at most 256 KB read (~320 KiB held).
MAX_RESPONSE_HEADER_LINE = 8190
MAX_RESPONSE_HEADERS = 32
# What an attempt's record keeps of them (it rides to the log in every attempt's outbox
# entry): at most 64 names and 4 KiB of names and values, no value over 512 bytes so one
# long policy header cannot crowd the others out; what is left out is counted under
# OMITTED, a name no receiver can send (parentheses are not token characters).
RECORDED_HEADERS = 64
RECORDED_HEADER_BYTES = 4096
RECORDED_VALUE_BYTES = 512
OMITTED = "(left out)"
_OMITTED_ROOM = 32  # bytes kept for the OMITTED entry when anything is left out
_CUT = "\u2026"  # ends a value that was cut
_KEPT_START = 16  # bytes of a cut value, the mark included, below which it is dropped


@dataclass(frozen=True)
class OutboundRequest:
    url: str
    headers: Mapping[str, str]
    body: bytes
    timeout: float | None = None  # the whole attempt's, in seconds; None: the transport's


@dataclass(frozen=True)
class OutboundResponse:
    status: int | None  # None when no HTTP answer came back
    body: bytes = b""
    # As received, case-insensitive (within the bounds above): the engine reads Retry-After
    # from the whole answer, and records a bounded copy (recorded_headers).
    headers: Mapping[str, str] = field(default_factory=dict)
    # 'timeout', 'connection', 'invalid_response' (headers beyond our bounds, or not HTTP),
    # 'destination_blocked', 'invalid_url'; None when we got a status
    error: str | None = None
    duration_ms: int = 0


@dataclass(frozen=True)
class EgressProxy:
    """The HTTP proxy every delivery goes through: its URL without credentials, and the
    credentials apart, sent only to the proxy as Proxy-Authorization (Basic)."""

    url: URL
    # The Proxy-Authorization value (Basic), or None; kept out of repr: it is the password.
    authorization: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, text: str) -> EgressProxy:
        """``http://[user:password@]host[:port]``, user and password percent-encoded.
        Raises ValueError, never quoting ``text`` (it holds the password)."""
        try:
            parsed = URL(text)
        except ValueError:
            raise ValueError("the egress proxy is not a URL") from None
        if parsed.scheme != "http" or not parsed.host:
            raise ValueError("the egress proxy must be an http://host:port URL")
        if parsed.path not in ("", "/") or parsed.query_string or parsed.fragment:
            raise ValueError("the egress proxy URL has no path, query or fragment")
        authorization = None
        if parsed.user is not None or parsed.password is not None:
            user, password = parsed.user or "", parsed.password or ""
            if ":" in user:
                raise ValueError("the egress proxy's user name may not hold a ':'")
            authorization = aiohttp.encode_basic_auth(user, password)
        return cls(parsed.with_user(None).with_path(""), authorization)

    def headers_for(
        self, url: str, headers: Mapping[str, str]
    ) -> tuple[Mapping[str, str], Mapping[str, str] | None]:
        """The request's headers and the CONNECT's for a send to ``url`` (a checked URL).

        https: the credentials go on the CONNECT alone, never into the tunnel. http: the
        request itself goes to the proxy, so they go on it (the proxy removes them before
        forwarding, as tinyproxy and squid do). aiohttp's ``proxy_auth`` did both, but is
        deprecated, and its suggested ``proxy_headers`` reach only a CONNECT."""
        if self.authorization is None:
            return headers, None
        if URL(url).scheme == "https":
            return headers, {"Proxy-Authorization": self.authorization}
        with_credentials = CIMultiDict(headers)
        with_credentials["Proxy-Authorization"] = self.authorization
        return with_credentials, None


class Transport(Protocol):
    async def send(self, request: OutboundRequest) -> OutboundResponse: ...

    async def close(self) -> None: ...


Handler = Callable[[OutboundRequest], OutboundResponse | Awaitable[OutboundResponse]]


class MockTransport:
    """A transport that asks a plain function, for tests of everything above the wire."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler

    async def send(self, request: OutboundRequest) -> OutboundResponse:
        result = self._handler(request)
        if inspect.isawaitable(result):
            return await result
        return result

    async def close(self) -> None:
        return None


class AiohttpTransport:
    """One keep-alive session per process; every destination checked by the SSRF guard.

    Direct, the connector's resolver is the guard: aiohttp connects only to addresses it
    checked. Through ``proxy``, the connector only ever connects to the proxy (the
    operator's, often on a private address, so not guarded), and each send first checks
    every address of the receiver's host with ``Guard.check_url_before_proxy``."""

    def __init__(
        self,
        guard: Guard,
        *,
        total_timeout: float,
        connect_timeout: float,
        body_limit: int,
        connections: int = 200,
        proxy: EgressProxy | None = None,
    ) -> None:
        self._guard = guard
        self._total_timeout = total_timeout
        self._body_limit = body_limit
        self._proxy = proxy
        # The proxy's own name is looked up by aiohttp's default resolver; the receivers'
        # names by the guard's resolver, else one of ours (closed with the transport).
        self._lookup: AbstractResolver | None = None
        resolver: AbstractResolver | None = GuardedResolver(guard)
        if proxy is not None:
            resolver = None
            self._lookup = guard.resolver or aiohttp.ThreadedResolver()
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(resolver=resolver, limit=connections, limit_per_host=0),
            # aiohttp's connect timeout covers DNS, TCP and the TLS handshake; the attempt's
            # whole deadline is ours, in send().
            timeout=aiohttp.ClientTimeout(total=None, connect=connect_timeout),
            max_line_size=MAX_RESPONSE_HEADER_LINE,
            max_field_size=MAX_RESPONSE_HEADER_LINE,
            max_headers=MAX_RESPONSE_HEADERS,
            # Proxies from the environment would route around the guard; the only proxy
            # is the one given, whose sends are checked in send().
            trust_env=False,
        )

    async def send(self, request: OutboundRequest) -> OutboundResponse:
        started = time.perf_counter()

        def elapsed() -> int:
            return int((time.perf_counter() - started) * 1000)

        try:
            # One deadline over the whole attempt: connect, TLS, writing the request (to a
            # receiver that may never read it), the headers, the body we keep, and closing.
            # A timeout per read would let a body that drips a byte a second run for days.
            async with asyncio.timeout(request.timeout or self._total_timeout):
                await self._check(request.url)
                headers, proxy_headers = request.headers, None
                if self._proxy is not None:
                    headers, proxy_headers = self._proxy.headers_for(request.url, headers)
                async with self._session.post(
                    request.url,
                    data=request.body,
                    headers=headers,
                    allow_redirects=False,
                    proxy=None if self._proxy is None else self._proxy.url,
                    proxy_headers=proxy_headers,
                ) as response:
                    body = await _read_kept(response.content, self._body_limit)
                    return OutboundResponse(
                        response.status, body, CIMultiDict(response.headers), None, elapsed()
                    )
        except DestinationBlocked:
            return OutboundResponse(None, error="destination_blocked", duration_ms=elapsed())
        except TimeoutError:
            # Also a status line and headers whose body did not come in time: an answer
            # is what we keep of it, so a half answer is retried, never taken for a success.
            return OutboundResponse(None, error="timeout", duration_ms=elapsed())
        except aiohttp.InvalidURL:
            return OutboundResponse(None, error="invalid_url", duration_ms=elapsed())
        except aiohttp.ClientHttpProxyError:
            # The proxy refused the CONNECT (its deny list, 407, no route): nothing reached
            # the receiver, so it is a network failure, retried, not the receiver's answer.
            # (Before ClientResponseError, its base class.)
            return OutboundResponse(None, error="connection", duration_ms=elapsed())
        except aiohttp.ClientResponseError:
            # What aiohttp raises when the status line or headers do not parse, or pass the
            # bounds above.
            return OutboundResponse(None, error="invalid_response", duration_ms=elapsed())
        except (aiohttp.ClientError, OSError) as exc:
            error = "destination_blocked" if blocked_reason(exc) else "connection"
            return OutboundResponse(None, error=error, duration_ms=elapsed())

    async def _check(self, url: str) -> None:
        """Raise DestinationBlocked unless ``url`` may be sent to (a failed lookup of its
        host, through a proxy, raises the resolver's OSError: a network error)."""
        if self._proxy is None:
            # aiohttp skips the resolver for IP literals, so literals are checked here.
            self._guard.check_url(url)
        else:
            await self._guard.check_url_before_proxy(url, self._lookup)

    async def close(self) -> None:
        await self._session.close()
        if self._lookup is not None and self._lookup is not self._guard.resolver:
            await self._lookup.close()


async def _read_kept(content: aiohttp.StreamReader, limit: int) -> bytes:
    """The body's first ``limit`` bytes however the receiver cuts them up, and not a byte
    more: the rest of a long or endless body is never read (the connection is closed)."""
    kept = bytearray()
    while len(kept) < limit:
        piece = await content.read(limit - len(kept))
        if not piece:
            break
        kept += piece
    return bytes(kept)


def recorded_headers(
    headers: Mapping[str, str], redact: Callable[[str, str], str]
) -> dict[str, str]:
    """What an attempt's record keeps of an answer's headers: names lower-cased, the values
    of one name joined with ", ", each value as ``redact(name, value)`` gives it, within the
    RECORDED_* bounds (a cut value ends with "…"; the headers dropped are counted under
    OMITTED). Redacted before it is cut, so a cut never keeps part of a secret.

    A multidict's ``items()`` gives every line, repeated names included."""
    folded: dict[str, str] = {}
    for raw_name, raw_value in headers.items():
        name = _text(raw_name).lower()
        value = redact(name, _text(raw_value))
        folded[name] = f"{folded[name]}, {value}" if name in folded else value
    if (
        len(folded) <= RECORDED_HEADERS
        and _size(folded.items()) <= RECORDED_HEADER_BYTES
        and all(len(value.encode()) <= RECORDED_VALUE_BYTES for value in folded.values())
    ):
        return folded
    # The shortest first, so a few long headers cannot crowd out the ordinary ones (a date,
    # a content type); the record keeps the order they came in.
    chosen: dict[str, str] = {}
    room = RECORDED_HEADER_BYTES - _OMITTED_ROOM
    for name in sorted(folded, key=lambda n: _size([(n, folded[n])])):
        cut = _cut(folded[name], min(RECORDED_VALUE_BYTES, room - len(name.encode())))
        # Without room for its name and a useful start of its value a header is dropped.
        if cut is not None and len(chosen) < RECORDED_HEADERS - 1:
            chosen[name] = cut
            room -= _size([(name, cut)])
    kept = {name: chosen[name] for name in folded if name in chosen}
    left_out = len(folded) - len(kept)
    if left_out:
        kept[OMITTED] = f"{left_out} header{'s' if left_out > 1 else ''}"
    return kept


def _text(raw: str) -> str:
    # aiohttp decodes header bytes as UTF-8 with surrogate escapes; the record is JSON,
    # which has no place for a lone surrogate (orjson refuses it): bad bytes become U+FFFD.
    return raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _size(pairs: Iterable[tuple[str, str]]) -> int:
    return sum(len(name.encode()) + len(value.encode()) for name, value in pairs)


def _cut(value: str, limit: int) -> str | None:
    """``value`` in at most ``limit`` UTF-8 bytes, ending with the cut mark if it was cut;
    None when the limit leaves less than _KEPT_START bytes of it."""
    data = value.encode()
    if len(data) <= limit:
        return value
    if limit < _KEPT_START:
        return None
    return data[: limit - len(_CUT.encode())].decode("utf-8", "ignore") + _CUT
