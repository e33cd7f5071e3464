"""Tests for the SSRF guard.

No test resolves a real internet name: every hostname goes through FakeResolver,
and the only sockets opened are on 127.0.0.1.
"""

from __future__ import annotations

import pickle
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from tests.support.fake_dns import FakeResolver
from webhook_service.delivery.ssrf import (
    _PASSED_KEPT,
    REASONS,
    DestinationBlocked,
    Guard,
    GuardedResolver,
    blocked_reason,
    redact_url,
)

# (url, expected reason) -- every blocked range, spelling trick and syntax rule.
HOSTILE = [
    # schemes
    ("ftp://example.com/", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("gopher://example.com:70/_x", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("//example.com/hook", "scheme"),
    # credentials
    ("http://user:pass@example.com/", "userinfo"),
    ("http://user@example.com/", "userinfo"),
    ("https://:secret@example.com/", "userinfo"),
    ("http://@example.com/", "userinfo"),
    ("http://a@b@example.com/", "userinfo"),
    # host / port syntax
    ("http:///path", "no_host"),
    ("http://:80/", "no_host"),
    ("http://example.com:0/", "bad_port"),
    ("http://example.com:65536/", "bad_port"),
    ("http://example.com:99999/", "bad_port"),
    ("http://example.com:-1/", "bad_port"),
    ("http://example.com:+80/", "bad_port"),
    ("http://127.0.0.1 foo/", "invalid_url"),
    ("http://[::1/", "invalid_url"),
    # localhost-like names
    ("http://localhost/", "localhost_name"),
    ("http://LOCALHOST./", "localhost_name"),
    ("http://api.localhost/", "localhost_name"),
    ("http://localhost.localdomain/", "localhost_name"),
    ("http://ip6-localhost/", "localhost_name"),
    ("http://printer.local/", "localhost_name"),
    ("http://metadata.google.internal/computeMetadata/v1/", "localhost_name"),
    ("http://db.corp.internal/", "localhost_name"),
    ("http://router.home.arpa/", "localhost_name"),
    ("http://nas.localdomain/", "localhost_name"),
    # IPv4 spellings a resolver would turn into 127.0.0.1
    ("http://2130706433/", "non_canonical_ip"),
    ("http://0x7f.1/", "non_canonical_ip"),
    ("http://0x7f000001/", "non_canonical_ip"),
    ("http://0177.0.0.1/", "non_canonical_ip"),
    ("http://127.1/", "non_canonical_ip"),
    ("http://127.0.0.01/", "non_canonical_ip"),
    ("http://127.0.0.1./", "non_canonical_ip"),
    ("http://0x7f.0.0.1/", "non_canonical_ip"),
    ("http://1.2.3.4.5/", "non_canonical_ip"),
    ("http://[fe80::1%25eth0]/", "non_canonical_ip"),
    # IPv4 ranges
    ("http://0.0.0.0/", "blocked_address"),
    ("http://10.0.0.1/", "blocked_address"),
    ("http://100.64.0.1/", "blocked_address"),
    ("http://100.127.255.254/", "blocked_address"),
    ("http://127.0.0.1:8080/", "blocked_address"),
    ("http://169.254.169.254/latest/meta-data/", "blocked_address"),
    ("http://172.16.0.1/", "blocked_address"),
    ("http://172.31.255.255/", "blocked_address"),
    ("http://192.0.0.8/", "blocked_address"),
    ("http://192.0.2.1/", "blocked_address"),
    ("http://192.88.99.1/", "blocked_address"),
    ("http://192.168.1.1/", "blocked_address"),
    ("http://198.18.0.1/", "blocked_address"),
    ("http://198.19.255.255/", "blocked_address"),
    ("http://198.51.100.7/", "blocked_address"),
    ("http://203.0.113.9/", "blocked_address"),
    ("http://224.0.0.1/", "blocked_address"),
    ("http://239.255.255.250/", "blocked_address"),
    ("http://240.0.0.1/", "blocked_address"),
    ("http://255.255.255.255/", "blocked_address"),
    # Fullwidth digits: yarl NFKC-normalises them to 127.0.0.1.
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "blocked_address"),
    # IPv6 ranges and IPv4 wrapped in IPv6
    ("http://[::]/", "blocked_address"),
    ("http://[::1]/", "blocked_address"),
    ("http://[0:0:0:0:0:0:0:1]/", "blocked_address"),
    ("http://[::ffff:127.0.0.1]/", "blocked_address"),
    ("http://[::ffff:7f00:1]/", "blocked_address"),
    ("http://[0:0:0:0:0:ffff:7f00:1]/", "blocked_address"),
    ("http://[::ffff:169.254.169.254]/", "blocked_address"),
    ("http://[::ffff:10.0.0.1]/", "blocked_address"),
    ("http://[::127.0.0.1]/", "blocked_address"),
    ("http://[fd00:ec2::254]/", "blocked_address"),
    ("http://[fc00::1]/", "blocked_address"),
    ("http://[fe80::1]/", "blocked_address"),
    ("http://[fec0::1]/", "blocked_address"),
    ("http://[ff02::1]/", "blocked_address"),
    ("http://[100::1]/", "blocked_address"),
    ("http://[2001:db8::1]/", "blocked_address"),
    ("http://[64:ff9b::a00:1]/", "blocked_address"),
    ("http://[64:ff9b:1::1]/", "blocked_address"),
    ("http://[2002:7f00:1::]/", "blocked_address"),
    ("http://[2001::1]/", "blocked_address"),
    ("http://[2001:20::1]/", "blocked_address"),
    ("http://[4000::1]/", "blocked_address"),
]

PUBLIC = [
    "https://93.184.215.14/",
    "https://[2606:4700::1111]/",
    "http://8.8.8.8:8080/hook?x=1",
    "https://example.com/hook",
    "https://hooks.example.com:443/a/b",
    "http://172.32.0.1/",  # just above 172.16.0.0/12
    "http://100.128.0.1/",  # just above 100.64.0.0/10
    "http://11.0.0.1/",
    "https://[::ffff:93.184.215.14]/",  # mapped public IPv4 is still public
    "https://deadbeef.cafe/",  # hex letters only, but not a number
    "https://0x7f.example.com/",  # numeric-looking label, but not the last one
    "https://bücher.example/",
    "HTTPS://EXAMPLE.COM/",
]


@pytest.mark.parametrize(("url", "reason"), HOSTILE)
def test_hostile_urls_are_blocked(url: str, reason: str) -> None:
    assert reason in REASONS
    with pytest.raises(DestinationBlocked) as info:
        Guard().check_url(url)
    assert info.value.reason == reason, info.value.detail
    assert info.value.detail


def test_hostile_table_is_large_enough() -> None:
    assert len(HOSTILE) >= 40
    assert {reason for _, reason in HOSTILE} >= REASONS - {"https_required", "unresolvable"}


@pytest.mark.parametrize("url", PUBLIC)
def test_public_urls_pass(url: str) -> None:
    Guard().check_url(url)


def test_a_url_passed_once_is_not_checked_again_and_a_blocked_one_always_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guard = Guard()
    parsed: list[str] = []
    parse = guard._parse

    def counting(url: str | URL) -> URL:
        parsed.append(str(url))
        return parse(url)

    monkeypatch.setattr(guard, "_parse", counting)
    for _ in range(3):
        guard.check_url("https://example.com/hook")
        with pytest.raises(DestinationBlocked):
            guard.check_url("http://127.0.0.1/hook")
    assert parsed == ["https://example.com/hook"] + ["http://127.0.0.1/hook"] * 3
    # It keeps a bounded number: the oldest is checked afresh once that many others passed.
    for n in range(_PASSED_KEPT):
        guard.check_url(f"https://example.com/{n}")
    parsed.clear()
    guard.check_url("https://example.com/hook")
    guard.check_url(f"https://example.com/{_PASSED_KEPT - 1}")
    assert parsed == ["https://example.com/hook"]


def test_https_only() -> None:
    guard = Guard(https_only=True)
    with pytest.raises(DestinationBlocked) as info:
        guard.check_url("http://example.com/")
    assert info.value.reason == "https_required"
    guard.check_url("https://example.com/")
    # Scheme problems win over https_required so the message names the real issue.
    with pytest.raises(DestinationBlocked) as info:
        guard.check_url("ftp://example.com/")
    assert info.value.reason == "scheme"


def test_detail_names_the_range() -> None:
    with pytest.raises(DestinationBlocked) as info:
        Guard().check_url("http://127.0.0.1/")
    assert info.value.detail == "127.0.0.1 is a loopback address"
    with pytest.raises(DestinationBlocked) as info:
        Guard().check_url("http://[::ffff:7f00:1]/")
    assert "127.0.0.1" in info.value.detail
    assert "loopback" in info.value.detail
    with pytest.raises(DestinationBlocked) as info:
        Guard().check_url("http://169.254.169.254/")
    assert "metadata" in info.value.detail


@pytest.mark.parametrize(
    "url",
    [
        "http://admin:hunter2@10.0.0.1/",
        "http://admin:hunter2@example.com:99999/",
        "ftp://admin:hunter2@example.com/",
        "http://admin:hunter2@[::1/",
    ],
)
def test_detail_never_leaks_credentials(url: str) -> None:
    with pytest.raises(DestinationBlocked) as info:
        Guard().check_url(url)
    err = info.value
    for text in (err.detail, str(err), repr(err), str(err.args)):
        assert "hunter2" not in text
    assert err.__cause__ is None


def test_destination_blocked_is_oserror_and_pickles() -> None:
    err = DestinationBlocked("blocked_address", "10.0.0.1 is a private address")
    assert isinstance(err, OSError)
    assert err.errno is None
    assert err.strerror == "10.0.0.1 is a private address"
    copy = pickle.loads(pickle.dumps(err))  # noqa: S301 - our own object
    assert (copy.reason, copy.detail) == (err.reason, err.detail)


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("93.184.215.14", True),
        ("2606:4700::1111", True),
        ("10.1.2.3", False),
        ("169.254.169.254", False),
        ("::1", False),
        ("::ffff:127.0.0.1", False),
        ("fe80::1%eth0", False),
        ("fd00:ec2::254", False),
        ("not-an-ip", False),
        ("", False),
    ],
)
def test_check_address(address: str, allowed: bool) -> None:
    guard = Guard()
    assert guard.is_allowed_address(address) is allowed
    if allowed:
        guard.check_address(address)
    else:
        with pytest.raises(DestinationBlocked) as info:
            guard.check_address(address)
        assert info.value.reason == "blocked_address"


def test_allow_list_exempts_only_its_networks() -> None:
    guard = Guard(allowed_networks=["127.0.0.0/8"])
    guard.check_url("http://127.0.0.1:8080/")
    guard.check_url("http://127.8.9.10/")
    guard.check_address("::ffff:127.0.0.1")  # mapped form unwraps before the allow-list
    guard.check_url("http://[::ffff:127.0.0.1]/")
    with pytest.raises(DestinationBlocked) as info:
        guard.check_url("http://10.0.0.1/")
    assert info.value.reason == "blocked_address"
    with pytest.raises(DestinationBlocked):
        guard.check_url("http://[::1]/")  # ::1 is not in 127.0.0.0/8
    with pytest.raises(DestinationBlocked) as info:
        guard.check_url("http://127.1/")  # still a spelling trick, allow-list or not
    assert info.value.reason == "non_canonical_ip"


def test_allow_list_accepts_network_objects_and_rejects_bare_string() -> None:
    from ipaddress import IPv6Network, ip_network

    guard = Guard(allowed_networks=[ip_network("10.0.0.0/8"), IPv6Network("fd00::/8")])
    guard.check_address("10.9.9.9")
    guard.check_address("fd00:ec2::254")
    with pytest.raises(TypeError):
        Guard(allowed_networks="10.0.0.0/8")
    with pytest.raises(ValueError):
        Guard(allowed_networks=["not a network"])


def test_localhost_name_deferred_to_resolution_with_allow_list() -> None:
    # Without DNS, check_url cannot know where localhost points once loopback is allowed.
    Guard(allowed_networks=["127.0.0.0/8"]).check_url("http://localhost:8080/")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:pw@example.com/x?y=1", "https://***@example.com/x?y=1"),
        ("https://user:p@ss@example.com:8443/", "https://***@example.com:8443/"),
        ("https://example.com/a@b", "https://example.com/a@b"),
        ("https://example.com/?q=@x", "https://example.com/?q=@x"),
        ("//tok@example.com/", "//***@example.com/"),
        ("not a url", "not a url"),
        ("http://u:pw@[::1/", "http://***@[::1/"),
        ("http://u:pa/ss@example.com/x", "http://***@example.com/x"),
        ("http://u:pa#ss@example.com/x", "http://***@example.com/x"),
        ("https://example.com:8443/users/@me", "https://example.com:8443/users/@me"),
        ("http://[::1]:80/a@b", "http://[::1]:80/a@b"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


# -- resolution ------------------------------------------------------------


@pytest.mark.asyncio
async def test_check_url_resolved_refuses_name_pointing_at_loopback() -> None:
    resolver = FakeResolver({"evil.example": ["127.0.0.1"]})
    with pytest.raises(DestinationBlocked) as info:
        await Guard().check_url_resolved("https://evil.example/hook", resolver)
    assert info.value.reason == "blocked_address"
    assert info.value.detail == "evil.example resolves to 127.0.0.1, a loopback address"
    # All address families are checked at creation time, and the URL's port is passed.
    assert resolver.calls == [("evil.example", 443, socket.AF_UNSPEC)]
    assert not resolver.closed  # a resolver passed in belongs to the caller


@pytest.mark.asyncio
async def test_check_url_resolved_requires_every_address() -> None:
    resolver = FakeResolver({"mixed.example": ["93.184.215.14", "fd00:ec2::254"]})
    with pytest.raises(DestinationBlocked) as info:
        await Guard().check_url_resolved("https://mixed.example/", resolver)
    assert info.value.reason == "blocked_address"
    assert "fd00:ec2::254" in info.value.detail


@pytest.mark.asyncio
async def test_check_url_resolved_passes_public_and_literals() -> None:
    resolver = FakeResolver({"good.example": ["93.184.215.14", "2606:4700::1111"]})
    guard = Guard()
    await guard.check_url_resolved("https://good.example/", resolver)
    await guard.check_url_resolved("https://93.184.215.14/", resolver)
    await guard.check_url_resolved("https://[2606:4700::1111]/", resolver)
    assert [c[0] for c in resolver.calls] == ["good.example"]


@pytest.mark.asyncio
async def test_check_url_resolved_syntax_failures_skip_dns() -> None:
    resolver = FakeResolver({})
    with pytest.raises(DestinationBlocked) as info:
        await Guard().check_url_resolved("http://10.0.0.1/", resolver)
    assert info.value.reason == "blocked_address"
    with pytest.raises(DestinationBlocked) as info:
        await Guard().check_url_resolved("ftp://example.com/", resolver)
    assert info.value.reason == "scheme"
    assert resolver.calls == []


@pytest.mark.asyncio
async def test_check_url_resolved_unresolvable() -> None:
    with pytest.raises(DestinationBlocked) as info:
        await Guard().check_url_resolved("https://nowhere.example/", FakeResolver({}))
    assert info.value.reason == "unresolvable"
    assert isinstance(info.value.__cause__, socket.gaierror)
    with pytest.raises(DestinationBlocked) as info:
        await Guard().check_url_resolved(
            "https://empty.example/", FakeResolver({"empty.example": []})
        )
    assert info.value.reason == "unresolvable"


@pytest.mark.asyncio
async def test_check_url_resolved_localhost_with_allow_list() -> None:
    guard = Guard(allowed_networks=["127.0.0.0/8"])
    await guard.check_url_resolved(
        "http://localhost:8080/", FakeResolver({"localhost": ["127.0.0.1"]})
    )
    with pytest.raises(DestinationBlocked) as info:
        await guard.check_url_resolved(
            "http://localhost:8080/", FakeResolver({"localhost": ["127.0.0.1", "::1"]})
        )
    assert info.value.reason == "localhost_name"
    # A localhost-like name must stay inside the allow-list even if it points somewhere public.
    with pytest.raises(DestinationBlocked) as info:
        await guard.check_url_resolved(
            "http://metadata.google.internal/",
            FakeResolver({"metadata.google.internal": ["93.184.215.14"]}),
        )
    assert info.value.reason == "localhost_name"


@pytest.mark.asyncio
async def test_check_url_resolved_keeps_guarded_resolver_reason() -> None:
    guard = Guard()
    resolver = GuardedResolver(guard, FakeResolver({"evil.example": ["10.0.0.1"]}))
    with pytest.raises(DestinationBlocked) as info:
        await guard.check_url_resolved("https://evil.example/", resolver)
    assert info.value.reason == "blocked_address"


@pytest.mark.asyncio
async def test_guarded_resolver_filters_blocked_addresses() -> None:
    inner = FakeResolver({"mixed.example": ["10.0.0.1", "93.184.215.14", "::1", "2606:4700::1111"]})
    resolver = GuardedResolver(Guard(), inner)
    results = await resolver.resolve("mixed.example", 443, socket.AF_UNSPEC)
    assert [r["host"] for r in results] == ["93.184.215.14", "2606:4700::1111"]
    assert inner.calls == [("mixed.example", 443, socket.AF_UNSPEC)]


@pytest.mark.asyncio
async def test_guarded_resolver_refuses_name_pointing_at_loopback() -> None:
    resolver = GuardedResolver(Guard(), FakeResolver({"evil.example": ["127.0.0.1", "::1"]}))
    with pytest.raises(DestinationBlocked) as info:
        await resolver.resolve("evil.example", 80)
    assert info.value.reason == "blocked_address"
    assert "evil.example" in info.value.detail
    assert "loopback" in info.value.detail


@pytest.mark.asyncio
async def test_guarded_resolver_localhost_names() -> None:
    inner = FakeResolver({"localhost": ["127.0.0.1", "::1"], "db.internal": ["10.0.0.5"]})
    with pytest.raises(DestinationBlocked) as info:
        await GuardedResolver(Guard(), inner).resolve("localhost", 80)
    assert info.value.reason == "localhost_name"

    allowed = GuardedResolver(Guard(allowed_networks=["127.0.0.0/8"]), inner)
    results = await allowed.resolve("localhost", 80)
    assert [r["host"] for r in results] == ["127.0.0.1"]
    with pytest.raises(DestinationBlocked) as info:
        await allowed.resolve("db.internal", 80)
    assert info.value.reason == "localhost_name"


@pytest.mark.asyncio
async def test_guarded_resolver_passes_lookup_errors_through() -> None:
    resolver = GuardedResolver(Guard(), FakeResolver({"empty.example": []}))
    with pytest.raises(socket.gaierror):
        await resolver.resolve("nowhere.example", 80)
    with pytest.raises(DestinationBlocked) as info:
        await resolver.resolve("empty.example", 80)
    assert info.value.reason == "unresolvable"


@pytest.mark.asyncio
async def test_guard_resolver_serves_creation_and_send_checks() -> None:
    own = FakeResolver({"flip.example": ["93.184.215.14"]})
    guard = Guard(resolver=own)
    await guard.check_url_resolved("https://flip.example/")
    own.table["flip.example"] = ["127.0.0.1"]
    with pytest.raises(DestinationBlocked):
        await guard.check_url_resolved("https://flip.example/")
    guarded = GuardedResolver(guard)
    with pytest.raises(DestinationBlocked):
        await guarded.resolve("flip.example", 443)
    await guarded.close()
    assert len(own.calls) == 3
    assert not own.closed  # the guard's resolver belongs to whoever built the guard


@pytest.mark.asyncio
async def test_guarded_resolver_close_and_lazy_default() -> None:
    inner = FakeResolver({})
    resolver = GuardedResolver(Guard(), inner)
    await resolver.close()
    assert inner.closed
    # Built outside any event loop must work; the default inner resolver is made on use.
    await GuardedResolver(Guard()).close()


def test_guarded_resolver_constructible_without_loop() -> None:
    GuardedResolver(Guard())


# -- blocked_reason ----------------------------------------------------------


def test_blocked_reason_digs_through_wrappers() -> None:
    blocked = DestinationBlocked("blocked_address", "10.0.0.1 is a private address")
    assert blocked_reason(blocked) is blocked
    assert blocked_reason(ValueError("x")) is None

    try:
        try:
            raise blocked
        except DestinationBlocked as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        assert blocked_reason(outer) is blocked

    group = BaseExceptionGroup("many", [ValueError("a"), blocked])
    assert blocked_reason(group) is blocked


# -- real aiohttp ------------------------------------------------------------


@asynccontextmanager
async def counting_server() -> AsyncIterator[tuple[int, list[str]]]:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port, seen
    finally:
        await runner.cleanup()


def guarded_session(guard: Guard) -> aiohttp.ClientSession:
    inner = FakeResolver({"evil.example": ["127.0.0.1"]})
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(guard, inner))
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=10))


@pytest.mark.asyncio
async def test_aiohttp_post_to_name_resolving_to_loopback_is_blocked() -> None:
    async with counting_server() as (port, seen), guarded_session(Guard()) as session:
        with pytest.raises(aiohttp.ClientError) as info:
            await session.post(f"http://evil.example:{port}/hook", data=b"{}")
        blocked = blocked_reason(info.value)
        assert blocked is not None
        assert blocked.reason == "blocked_address"
        assert "loopback" in blocked.detail
        # The documented shape in aiohttp 3.14: ClientConnectorDNSError wrapping ours.
        assert isinstance(info.value, aiohttp.ClientConnectorError)
        assert info.value.os_error is blocked
        assert info.value.__cause__ is blocked
        assert seen == []


@pytest.mark.asyncio
async def test_aiohttp_post_arrives_when_loopback_is_allowed() -> None:
    guard = Guard(allowed_networks=["127.0.0.0/8"])
    async with counting_server() as (port, seen), guarded_session(guard) as session:
        async with session.post(f"http://evil.example:{port}/hook", data=b"{}") as resp:
            assert resp.status == 200
        assert seen == ["/hook"]


@pytest.mark.asyncio
async def test_aiohttp_skips_resolver_for_ip_literals() -> None:
    # Why callers must run check_url before each send: aiohttp connects to an IP
    # literal without asking the resolver, so GuardedResolver alone cannot stop it.
    async with counting_server() as (port, seen), guarded_session(Guard()) as session:
        url = f"http://127.0.0.1:{port}/literal"
        with pytest.raises(DestinationBlocked):
            Guard().check_url(url)
        async with session.post(url, data=b"{}") as resp:
            assert resp.status == 200
        assert seen == ["/literal"]
