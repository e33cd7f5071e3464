"""SSRF guard for outgoing webhook deliveries.

Webhook URLs are chosen by outsiders, so every destination is checked before we
connect.  The guard runs in two places:

1. **Endpoint creation / update** -- :meth:`Guard.check_url` (syntax and IP
   literals, no DNS) or :meth:`Guard.check_url_resolved` (also resolves the name
   and requires *every* address to pass).  A :class:`DestinationBlocked` carries a
   machine ``reason`` and a human ``detail`` suitable for a 422 body.

2. **Every send** -- plug :class:`GuardedResolver` into aiohttp::

       guard = Guard(allowed_networks=settings.allowed_networks)
       connector = aiohttp.TCPConnector(resolver=GuardedResolver(guard))
       session = aiohttp.ClientSession(connector=connector)
       ...
       guard.check_url(url)                  # aiohttp skips the resolver for IP literals
       async with session.post(url, data=body, allow_redirects=False) as resp: ...

   aiohttp connects to exactly the addresses the resolver returns, so resolving,
   checking and connecting use the same address and DNS rebinding between the
   check and the connect is not possible.

   Two gaps the caller must close, because the resolver never sees them:

   * IP-literal hosts (``http://10.0.0.1/``, ``http://[::1]/``) are connected to
     without calling the resolver, so call :meth:`Guard.check_url` before each
     send.
   * A redirect ``Location`` pointing at an IP literal would likewise bypass the
     resolver: send with ``allow_redirects=False`` (or run ``check_url`` on each
     ``Location`` yourself and follow manually).

   Proxies also bypass it: with ``proxy=`` aiohttp resolves only the proxy host, and the
   proxy resolves the destination itself.  A send through an egress proxy therefore
   calls :meth:`Guard.check_url_before_proxy` first: *every* address the host resolves
   to must pass, since we cannot choose which one the proxy connects to.  The proxy
   looks the name up again, so a rebinding between our lookup and its own is only
   stopped by the proxy's own deny list.

How a caller recognises a blocked send
--------------------------------------
When :class:`GuardedResolver` refuses a host, aiohttp 3.14 wraps our exception:
the caller sees ``aiohttp.ClientConnectorDNSError`` (a subclass of
``ClientConnectorError`` and of ``OSError``) whose ``.os_error`` *is* the
:class:`DestinationBlocked`, which is also its ``__cause__``.  Use
:func:`blocked_reason` rather than relying on that exact shape::

    try:
        async with session.post(url, ...) as resp: ...
    except aiohttp.ClientError as exc:
        blocked = blocked_reason(exc)
        if blocked is not None:
            ...  # policy refusal: blocked.reason / blocked.detail
        else:
            ...  # ordinary network error: retry later

Every reason except ``unresolvable`` is a policy decision that retrying will not
change.  ``GuardedResolver`` raises ``unresolvable`` only when the inner resolver
returns an empty list; a failed lookup (``socket.gaierror``) passes through
unchanged as an ordinary ``ClientConnectorDNSError`` with no ``DestinationBlocked``.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

__all__ = [
    "REASONS",
    "DestinationBlocked",
    "Guard",
    "GuardedResolver",
    "blocked_reason",
    "redact_url",
]

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network

REASONS = frozenset(
    {
        "scheme",
        "https_required",
        "userinfo",
        "no_host",
        "bad_port",
        "localhost_name",
        "non_canonical_ip",
        "blocked_address",
        "unresolvable",
        # yarl could not parse the URL, or the host holds characters no DNS name has.
        "invalid_url",
    }
)


class DestinationBlocked(OSError):
    """The destination is not allowed.

    Subclasses ``OSError`` so that, raised from a resolver, aiohttp wraps it in
    ``ClientConnectorDNSError(os_error=...)`` instead of letting an unexpected
    exception type escape the client.
    """

    reason: str
    detail: str

    def __init__(self, reason: str, detail: str) -> None:
        # errno None keeps aiohttp from mistaking this for a real socket error code;
        # strerror is what ClientConnectorError prints between brackets.
        super().__init__(None, detail)
        self.reason = reason
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.detail} ({self.reason})"

    def __reduce__(self) -> tuple[type[DestinationBlocked], tuple[str, str]]:
        # OSError's default pickling would replay (None, detail) into __init__.
        return (type(self), (self.reason, self.detail))


# Labels end up in 422 responses, so they explain rather than cite RFCs.
_BLOCKED_V4: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(net), label)
    for net, label in (
        ("0.0.0.0/8", "a 'this network' address"),
        ("10.0.0.0/8", "a private address"),
        ("100.64.0.0/10", "a carrier-grade NAT (shared) address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address (cloud metadata lives here)"),
        ("172.16.0.0/12", "a private address"),
        ("192.0.0.0/24", "an IETF protocol assignment address"),
        ("192.0.2.0/24", "a documentation address"),
        ("192.88.99.0/24", "a 6to4 relay anycast address"),
        ("192.168.0.0/16", "a private address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved or broadcast address"),
    )
)

_BLOCKED_V6: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(net), label)
    for net, label in (
        ("::/128", "the unspecified address"),
        ("::1/128", "a loopback address"),
        ("fc00::/7", "a unique local (private) address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local address"),
        ("ff00::/8", "a multicast address"),
        ("100::/64", "a discard-only address"),
        ("2001:db8::/32", "a documentation address"),
        ("3fff::/20", "a documentation address"),
        ("64:ff9b::/96", "a NAT64 address"),
        ("64:ff9b:1::/48", "a local-use NAT64 address"),
        ("2002::/16", "a 6to4 address"),
        ("2001::/32", "a Teredo address"),
        ("2001:2::/48", "a benchmarking address"),
        ("2001:10::/28", "an ORCHID address"),
        ("2001:20::/28", "an ORCHID address"),
    )
)

# Everything routable on the public IPv6 internet sits in 2000::/3; an explicit
# table alone would silently pass whatever IANA reserves next.
_GLOBAL_UNICAST_V6 = IPv6Network("2000::/3")
_V4_COMPATIBLE_V6 = IPv6Network("::/96")

_LOCALHOST_NAMES = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "localhost6",
        "localhost6.localdomain6",
        "ip6-localhost",
        "ip6-loopback",
        "metadata.google.internal",
    }
)
_LOCALHOST_SUFFIXES = (".localhost", ".localdomain", ".local", ".internal", ".home.arpa")

# A label a libc inet_aton() would read as a number (decimal, octal or 0x-hex).
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)
_HOSTNAME_CHARS = re.compile(r"[a-z0-9._-]+")
_DETAIL_HOST_MAX = 100
_C0_AND_SPACE = "".join(chr(c) for c in range(0x21))


def _short(text: str) -> str:
    """Keep attacker-chosen hosts from bloating error bodies and logs."""
    if len(text) <= _DETAIL_HOST_MAX:
        return text
    return text[:_DETAIL_HOST_MAX] + "..."


def _parse_ip(address: str) -> IPAddress | None:
    # Resolvers report link-local IPv6 as "fe80::1%eth0"; the zone does not
    # change which range the address is in.
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return None
    return ip


def _embedded_v4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address a mapped (::ffff:a.b.c.d) or compatible (::a.b.c.d) form targets."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    # :: and ::1 are themselves, not compatible forms of 0.0.0.0 / 0.0.0.1.
    if ip in _V4_COMPATIBLE_V6 and int(ip) > 1:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _why_blocked_v4(ip: IPv4Address) -> str | None:
    for net, label in _BLOCKED_V4:
        if ip in net:
            return label
    return None


def _why_blocked(ip: IPAddress) -> str | None:
    """Why ``ip`` is not public unicast, or None if it is."""
    if isinstance(ip, IPv4Address):
        return _why_blocked_v4(ip)
    inner = _embedded_v4(ip)
    if inner is not None:
        inner_why = _why_blocked_v4(inner)
        if ip.ipv4_mapped is not None:
            if inner_why is None:
                return None
            return f"an IPv4-mapped form of {inner}, {inner_why}"
        if inner_why is not None:
            return f"an IPv4-compatible form of {inner}, {inner_why}"
        return "a deprecated IPv4-compatible address"
    for net6, label in _BLOCKED_V6:
        if ip in net6:
            return label
    if ip not in _GLOBAL_UNICAST_V6:
        return "outside the global unicast range 2000::/3"
    return None


def _is_canonical_ipv4(host: str) -> bool:
    parts = host.split(".")
    if len(parts) != 4:
        return False
    for part in parts:
        if not (1 <= len(part) <= 3 and part.isascii() and part.isdigit()):
            return False
        if (part[0] == "0" and len(part) > 1) or int(part) > 255:
            return False
    return True


def _looks_numeric(host: str) -> bool:
    """True if a resolver could read ``host`` as an IPv4 number.

    Follows the WHATWG URL rule: a host whose last label is numeric is an IPv4
    address, because no real TLD is numeric.  This catches 2130706433, 0x7f.1,
    0177.0.0.1, 127.1 and trailing-dot forms without flagging names like
    ``deadbeef.cafe`` that merely consist of hex letters.
    """
    stripped = host.rstrip(".")
    if not stripped:
        return False
    return _NUMERIC_LABEL.fullmatch(stripped.rsplit(".", 1)[-1]) is not None


def _is_localhost_name(host: str) -> bool:
    name = host.rstrip(".").lower()
    return name in _LOCALHOST_NAMES or name.endswith(_LOCALHOST_SUFFIXES)


def _is_ip_literal(host: str) -> bool:
    # Same split aiohttp uses to decide whether to call the resolver at all.
    return ":" in host or _is_canonical_ipv4(host)


def _clean(url: str) -> str:
    # yarl (like urllib) drops tabs/newlines and trims control characters and
    # spaces, so our raw look at the authority must see the same text it does.
    return re.sub(r"[\t\r\n]", "", url).strip(_C0_AND_SPACE)


def _split_authority(url: str) -> tuple[str, str | None, str]:
    """Split ``url`` into (lowercased scheme, raw authority or None, rest).

    Deliberately lenient: it only classifies URLs yarl rejects and spots an '@'
    that yarl silently drops, it never decides where we connect.
    """
    scheme = ""
    rest = url
    match = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", url)
    if match:
        scheme = match.group(1).lower()
        rest = url[match.end() :]
    if not rest.startswith("//"):
        return scheme, None, rest
    rest = rest[2:]
    end = len(rest)
    for delim in "/?#":
        idx = rest.find(delim)
        if idx != -1:
            end = min(end, idx)
    return scheme, rest[:end], rest[end:]


def _split_host_port(hostport: str) -> tuple[str, str | None]:
    if hostport.startswith("["):
        close = hostport.find("]")
        if close == -1:
            return hostport, None
        host, after = hostport[: close + 1], hostport[close + 1 :]
        return host, after[1:] if after.startswith(":") else None
    host, sep, port = hostport.rpartition(":")
    if not sep:
        return hostport, None
    return host, port


def _port_ok(port: str) -> bool:
    # Stricter than yarl, which lets int() accept "+80" or Arabic-Indic digits.
    return port.isascii() and port.isdigit() and 1 <= int(port) <= 65535


def redact_url(url: str) -> str:
    """``url`` with any userinfo replaced by ``***``, safe to log.

    Never raises, so it can be used on URLs that failed validation.
    """
    text = str(url)
    scheme_match = re.match(r"([A-Za-z][A-Za-z0-9+.-]*:)?//", text)
    if scheme_match is None:
        return text
    start = scheme_match.end()
    end = len(text)
    for delim in "/?#":
        idx = text.find(delim, start)
        if idx != -1:
            end = min(end, idx)
    authority = text[start:end]
    if "@" not in authority:
        _, port = _split_host_port(authority)
        if not port or port.isdigit() or "@" not in text[end:]:
            return text
        # "user:pa/ss@host" or "user:pa#ss@host": an unencoded delimiter in the
        # password ended the authority early, leaving a bogus port.  Redact up to
        # the last '@' rather than log the rest of the password.
        end = text.rindex("@") + 1
        authority = text[start:end]
    # The host follows the LAST '@': lax parsers let '@' appear inside a password.
    host = authority.rpartition("@")[2]
    return f"{text[:start]}***@{host}{text[end:]}"


def _resolves_to(host: str, shown: str, why: str) -> str:
    return f"{_short(host)} resolves to {shown}, {why}"


def _as_network(value: str | IPNetwork) -> IPNetwork:
    if isinstance(value, IPv4Network | IPv6Network):
        return value
    return ipaddress.ip_network(value)


_PASSED_KEPT = 4096  # URLs Guard.check_url remembers having passed


class Guard:
    """Decides whether a webhook destination may be contacted.

    ``allowed_networks`` is the operator's only exemption: an address inside one
    of them is allowed even if it is in a blocked range, and a localhost-like
    name is allowed when every address it resolves to is inside them.

    ``resolver`` is where names are looked up, both by :meth:`check_url_resolved`
    and by a :class:`GuardedResolver` built on this guard; None means the system
    resolver.  Whoever passes one in closes it.
    """

    def __init__(
        self,
        allowed_networks: Sequence[str | IPv4Network | IPv6Network] = (),
        https_only: bool = False,
        resolver: AbstractResolver | None = None,
    ) -> None:
        if isinstance(allowed_networks, str):
            # A bare "10.0.0.0/8" would iterate as characters, and "1" parses
            # as the network 0.0.0.1/32 -- fail loudly instead.
            raise TypeError("allowed_networks must be a sequence of networks, not a string")
        self.allowed_networks: tuple[IPNetwork, ...] = tuple(
            _as_network(net) for net in allowed_networks
        )
        self.https_only = https_only
        self.resolver = resolver
        # URLs check_url passed, oldest first: a worker sends to the same few thousand
        # over and over, and the check is pure (this guard's settings never change).
        self._passed: dict[str, None] = {}

    # -- addresses ---------------------------------------------------------

    def in_allowed_networks(self, address: str) -> bool:
        """True if ``address`` (or the IPv4 address it wraps) is operator-allowed."""
        ip = _parse_ip(address)
        if ip is None or not self.allowed_networks:
            return False
        candidates: list[IPAddress] = [ip]
        if isinstance(ip, IPv6Address):
            inner = _embedded_v4(ip)
            if inner is not None:
                candidates.append(inner)
        return any(c in net for c in candidates for net in self.allowed_networks)

    def _address_problem(self, address: str) -> tuple[str, str] | None:
        """(address as shown, why it is blocked), or None if it may be contacted."""
        if self.in_allowed_networks(address):
            return None
        ip = _parse_ip(address)
        if ip is None:
            return _short(address), "not an IP address"
        why = _why_blocked(ip)
        if why is None:
            return None
        if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
            # ::ffff:7f00:1 reads better as ::ffff:127.0.0.1: the reader sees the target.
            return f"::ffff:{ip.ipv4_mapped}", why
        return str(ip), why

    def is_allowed_address(self, address: str) -> bool:
        """True if :meth:`check_address` would accept ``address``."""
        return self._address_problem(address) is None

    def check_address(self, address: str) -> None:
        """Raise unless ``address`` is public unicast or inside ``allowed_networks``."""
        problem = self._address_problem(address)
        if problem is not None:
            shown, why = problem
            raise DestinationBlocked("blocked_address", f"{shown} is {why}")

    # -- URLs --------------------------------------------------------------

    def _scheme_problem(self, scheme: str) -> DestinationBlocked | None:
        if scheme not in ("http", "https"):
            shown = _short(scheme) if scheme else "(none)"
            return DestinationBlocked(
                "scheme", f"scheme {shown!r} is not allowed; use http or https"
            )
        if scheme == "http" and self.https_only:
            return DestinationBlocked("https_required", "only https URLs are allowed")
        return None

    def _classify_unparsable(self, text: str) -> DestinationBlocked:
        """Name the first problem in a URL yarl refused, for a useful 422."""
        scheme, authority, _ = _split_authority(text)
        problem = self._scheme_problem(scheme)
        if problem is not None:
            return problem
        if authority is None:
            return DestinationBlocked("no_host", "the URL has no host")
        if "@" in authority:
            return DestinationBlocked("userinfo", "credentials in the URL are not allowed")
        host, port = _split_host_port(authority)
        if not host:
            return DestinationBlocked("no_host", "the URL has no host")
        if port and not _port_ok(port):
            return DestinationBlocked("bad_port", f"port {_short(port)!r} is not in 1..65535")
        return DestinationBlocked("invalid_url", "the URL could not be parsed")

    def _parse(self, url: str | URL) -> URL:
        """Parse with yarl -- the parser aiohttp itself uses -- and run syntactic checks."""
        text = _clean(str(url))
        try:
            parsed = URL(text)
        except ValueError:
            # from None: yarl's message may quote the URL, credentials included.
            raise self._classify_unparsable(text) from None

        problem = self._scheme_problem(parsed.scheme)
        if problem is not None:
            raise problem
        _, authority, _ = _split_authority(text)
        # yarl drops an empty "@" but we refuse any: a URL carrying one was built
        # by someone probing parsers, not by a legitimate receiver.
        if (
            parsed.raw_user is not None
            or parsed.raw_password is not None
            or (authority is not None and "@" in authority)
        ):
            raise DestinationBlocked("userinfo", "credentials in the URL are not allowed")
        host = parsed.raw_host
        if not host:
            raise DestinationBlocked("no_host", "the URL has no host")
        if authority is not None:
            _, raw_port = _split_host_port(authority)
            if raw_port and not _port_ok(raw_port):
                raise DestinationBlocked(
                    "bad_port", f"port {_short(raw_port)!r} is not in 1..65535"
                )
        port = parsed.port
        if port is None or not 1 <= port <= 65535:
            raise DestinationBlocked("bad_port", f"port {port} is not in 1..65535")
        return parsed

    def _check_host(self, host: str) -> None:
        if ":" in host:
            if "%" in host:
                raise DestinationBlocked(
                    "non_canonical_ip", "IPv6 zone identifiers are not allowed in URLs"
                )
            if _parse_ip(host) is None:
                raise DestinationBlocked("invalid_url", f"{_short(host)} is not an IPv6 address")
            self.check_address(host)
            return
        if _looks_numeric(host):
            if not _is_canonical_ipv4(host):
                raise DestinationBlocked(
                    "non_canonical_ip",
                    f"{_short(host)} is not a canonical dotted-quad IPv4 address",
                )
            self.check_address(host)
            return
        if _HOSTNAME_CHARS.fullmatch(host) is None:
            # getaddrinfo() reads "127.0.0.1 foo" as 127.0.0.1; refuse such hosts
            # outright instead of relying on the resolver check alone.
            raise DestinationBlocked(
                "invalid_url",
                f"host {_short(host)!r} contains characters not allowed in a hostname",
            )
        if _is_localhost_name(host) and not self.allowed_networks:
            raise DestinationBlocked(
                "localhost_name", f"{_short(host)} names this machine or an internal network"
            )
        # With an allow-list, a localhost-like name may legitimately resolve into
        # it; check_url_resolved / GuardedResolver decide once the addresses are known.

    def check_url(self, url: str | URL) -> None:
        """Syntactic checks plus IP-literal checks; does no DNS.

        Raises :class:`DestinationBlocked`.  Localhost-like names are refused here
        only when there is no allow-list; otherwise the decision needs DNS.
        """
        text = str(url)
        if text in self._passed:
            return
        parsed = self._parse(text)
        assert parsed.raw_host is not None  # _parse guarantees a host
        self._check_host(parsed.raw_host)
        self._passed[text] = None
        if len(self._passed) > _PASSED_KEPT:
            del self._passed[next(iter(self._passed))]

    def _check_resolved(self, host: str, addresses: Sequence[str]) -> None:
        if _is_localhost_name(host):
            outside = [a for a in addresses if not self.in_allowed_networks(a)]
            if outside:
                raise DestinationBlocked(
                    "localhost_name",
                    f"{_short(host)} names this machine or an internal network and "
                    f"resolves to {outside[0]}, outside the allowed networks",
                )
            return
        for address in addresses:
            problem = self._address_problem(address)
            if problem is not None:
                raise DestinationBlocked("blocked_address", _resolves_to(host, *problem))

    async def check_url_resolved(
        self, url: str | URL, resolver: AbstractResolver | None = None
    ) -> None:
        """:meth:`check_url`, then resolve the host and require every address to pass.

        Meant for endpoint creation: it gives a clear reason up front, but DNS can
        change afterwards, so sends must still go through :class:`GuardedResolver`.
        The default resolver is the guard's own, else ``aiohttp.ThreadedResolver``;
        a resolver passed in is not closed.
        """
        await self._check_every_address(url, resolver, failed_lookup_blocks=True)

    async def check_url_before_proxy(
        self, url: str | URL, resolver: AbstractResolver | None = None
    ) -> None:
        """The check of a send through an egress proxy, which resolves the host itself.

        As :meth:`check_url_resolved`, every address the host resolves to must pass
        (the proxy may connect to any of them); but a lookup that fails raises the
        resolver's ``OSError`` unchanged, an ordinary network error that is retried,
        as it is when :class:`GuardedResolver` meets it on a direct send.
        """
        await self._check_every_address(url, resolver, failed_lookup_blocks=False)

    async def _check_every_address(
        self, url: str | URL, resolver: AbstractResolver | None, *, failed_lookup_blocks: bool
    ) -> None:
        parsed = self._parse(url)
        host = parsed.raw_host
        assert host is not None and parsed.port is not None
        self._check_host(host)
        if _is_ip_literal(host):
            return

        given = resolver if resolver is not None else self.resolver
        own = given is None
        active = aiohttp.ThreadedResolver() if given is None else given
        try:
            # AF_UNSPEC so IPv6 answers are checked too, not only what an
            # IPv4-only lookup would show.
            results = await active.resolve(host, parsed.port, family=socket.AF_UNSPEC)
        except DestinationBlocked:
            raise
        except OSError as exc:
            if not failed_lookup_blocks:
                raise
            raise DestinationBlocked(
                "unresolvable", f"{_short(host)} could not be resolved"
            ) from exc
        finally:
            if own:
                await active.close()
        if not results:
            raise DestinationBlocked("unresolvable", f"{_short(host)} resolved to no addresses")
        self._check_resolved(host, [r["host"] for r in results])


class GuardedResolver(AbstractResolver):
    """aiohttp resolver that only hands back addresses the guard allows.

    Blocked addresses are dropped; if none remain it raises
    :class:`DestinationBlocked`.  For localhost-like names only addresses inside
    ``allowed_networks`` are kept.  Lookup failures of the inner resolver
    propagate unchanged, so they stay ordinary (retryable) DNS errors.

    ``inner`` defaults to the guard's resolver, else the system resolver; an
    ``inner`` passed here is closed with this resolver, the guard's is not.
    """

    def __init__(self, guard: Guard, inner: AbstractResolver | None = None) -> None:
        self._guard = guard
        # Created lazily: ThreadedResolver() needs a running event loop, and this
        # object is often built at import or configuration time.
        self._inner = inner if inner is not None else guard.resolver
        self._owns_inner = inner is not None or guard.resolver is None

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if self._inner is None:
            self._inner = aiohttp.ThreadedResolver()
        results = await self._inner.resolve(host, port, family)
        if not results:
            raise DestinationBlocked("unresolvable", f"{_short(host)} resolved to no addresses")

        if _is_localhost_name(host):
            kept = [r for r in results if self._guard.in_allowed_networks(r["host"])]
            if not kept:
                raise DestinationBlocked(
                    "localhost_name",
                    f"{_short(host)} names this machine or an internal network and "
                    f"resolves only outside the allowed networks",
                )
            return kept

        kept = [r for r in results if self._guard.is_allowed_address(r["host"])]
        if not kept:
            problem = self._guard._address_problem(results[0]["host"])
            assert problem is not None  # nothing was kept, so the first was refused
            raise DestinationBlocked("blocked_address", _resolves_to(host, *problem))
        return kept

    async def close(self) -> None:
        if self._inner is not None and self._owns_inner:
            await self._inner.close()


def blocked_reason(exc: BaseException) -> DestinationBlocked | None:
    """Find the :class:`DestinationBlocked` behind an exception from an aiohttp call.

    Looks at the exception itself, ``ClientConnectorError.os_error``,
    ``__cause__``, ``__context__`` and members of exception groups, so it keeps
    working if aiohttp changes which of these it uses.
    """
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, DestinationBlocked):
            return current
        if isinstance(current, aiohttp.ClientConnectorError):
            pending.append(current.os_error)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        if current.__cause__ is not None:
            pending.append(current.__cause__)
        if current.__context__ is not None:
            pending.append(current.__context__)
    return None
