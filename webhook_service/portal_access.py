"""Who may use the subscriber portal, and for what: capabilities, grants and the sealed
portal credential (no aiohttp here: the store, the API and the portal's pages share it).

An operator makes a **grant** for one application (POST /v1/applications/{app}/portal-access)
and hands its **token** (``whp_…``) to the subscriber, as a link. The token does one thing:
at ``GET /portal/enter`` it is exchanged for a portal **session**, whose **credential**
(``whps_…``, the session sealed under the master key) is the only thing the API accepts from
the portal. The token is never an API key, and Redis keeps only its SHA-256.

Every grant and session carries its application's **generation** (store/portal.py):
``DELETE …/portal-access`` bumps it, and each one of an older generation is dead at once.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from webhook_service import sealing
from webhook_service.crypto import SecretBox


class Capability(StrEnum):
    VIEW = "view"
    MANAGE_ENDPOINTS = "manage_endpoints"
    VIEW_SECRETS = "view_secrets"
    ROTATE_SECRETS = "rotate_secrets"
    RETRY = "retry"
    SEND_EXAMPLES = "send_examples"


# Revealing a signing secret lets its holder forge our webhooks to the subscriber's own
# endpoint; that is theirs to do, but an operator grants it on purpose.
DEFAULT_CAPABILITIES: Final = frozenset(Capability) - {Capability.VIEW_SECRETS}
READ_ONLY: Final = frozenset({Capability.VIEW})

# expires_in bounds, in seconds: a minute to a week (a link handed out by mail may wait a
# weekend; one that lives longer than a week is a standing credential, which this is not).
DEFAULT_EXPIRES_IN: Final = 3600
MIN_EXPIRES_IN: Final = 60
MAX_EXPIRES_IN: Final = 7 * 86400

TOKEN_PREFIX: Final = "whp_"  # noqa: S105  # a prefix, not a secret
CREDENTIAL_PREFIX: Final = "whps_"
# Between the application id and the secret part of a token: in neither (ids are letters,
# digits and '_'; the secret is URL-safe base64, '-' and '_').
_TOKEN_SEP = "."  # noqa: S105
# Associated data: a sealed endpoint secret or dashboard session never opens as a portal
# session, nor the reverse.
_PURPOSE = "portal-session"


def granted(requested: Iterable[Capability] | None, read_only: bool) -> frozenset[Capability]:
    """What a grant holds: the capabilities asked for (or the default), always with VIEW (a
    portal that may see nothing shows nothing, and every page reads first), and VIEW alone
    when ``read_only``."""
    if read_only:
        return READ_ONLY
    chosen = DEFAULT_CAPABILITIES if requested is None else frozenset(requested)
    return chosen | READ_ONLY


def new_token(app_id: str) -> str:
    """A new grant's token. It names its application, so the grant is found in that
    application's bucket (store/keys.py): one slot, however many buckets."""
    return f"{TOKEN_PREFIX}{app_id}{_TOKEN_SEP}{secrets.token_urlsafe(32)}"


def token_application(token: str) -> str | None:
    """The application a token names, or None for anything not shaped like one."""
    if not token.startswith(TOKEN_PREFIX) or not token.isascii():
        return None
    app_id, sep, secret = token[len(TOKEN_PREFIX) :].partition(_TOKEN_SEP)
    return app_id if sep and app_id and len(secret) >= 32 else None


def token_digest(token: str) -> str:
    """What Redis keeps of a token. An unsalted hash is enough: the token carries 256 random
    bits, so no guess can be checked against a stolen copy of Redis."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Grant:
    """A live grant, as the store reads it back."""

    app_id: str
    capabilities: frozenset[Capability]
    expires_ms: int
    generation: int


@dataclass(frozen=True)
class SessionClaims:
    """What a portal credential holds, sealed: which session, of which application, with
    what, until when, and the form token its pages carry. Its Redis record (store/portal.py)
    says whether it still stands."""

    app_id: str
    sid: str
    capabilities: frozenset[Capability]
    csrf: str
    expires_ms: int


def new_claims(grant: Grant) -> SessionClaims:
    """A session opened from ``grant``: it lasts as long as the grant does."""
    return SessionClaims(
        grant.app_id,
        secrets.token_urlsafe(24),
        grant.capabilities,
        secrets.token_urlsafe(24),
        grant.expires_ms,
    )


def seal_credential(box: SecretBox, claims: SessionClaims) -> str:
    fields = {
        "a": claims.app_id,
        "s": claims.sid,
        "c": sorted(claims.capabilities),
        "t": claims.csrf,
        "e": claims.expires_ms,
    }
    return CREDENTIAL_PREFIX + sealing.seal(box, _PURPOSE, fields)


def open_credential(box: SecretBox, credential: str) -> SessionClaims | None:
    """The claims of a credential we sealed, or None (not one, forged, or of a master key
    this process no longer holds). Expiry and revocation are the caller's to check."""
    if not credential.startswith(CREDENTIAL_PREFIX) or not credential.isascii():
        return None
    fields = sealing.unseal(box, _PURPOSE, credential[len(CREDENTIAL_PREFIX) :])
    if fields is None:
        return None
    try:
        return SessionClaims(
            str(fields["a"]),
            str(fields["s"]),
            frozenset(Capability(c) for c in fields["c"]),
            str(fields["t"]),
            int(fields["e"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
