"""Portal grants and sessions in Redis (the model is webhook_service/portal_access.py).

Three keys per application, all of its bucket (keys.py), so each step below is one
MULTI/EXEC on one slot: the application's generation, one hash per grant (named by its
token's SHA-256, never the token) and one string per portal session (holding the generation
it was opened in). Each expires with its grant.

Revoking is one INCR of the generation: no list of grants or sessions to walk, and none
missed. A grant or session is alive while its record exists and carries the current
generation. A grant made, or a session opened, while a revocation runs reads the generation
first and writes after, so at worst it carries the old one: revoked, which is what its
caller, racing the revocation, gets.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from webhook_service.portal_access import (
    Capability,
    Grant,
    SessionClaims,
    new_token,
    token_application,
    token_digest,
)
from webhook_service.store import keys
from webhook_service.timeutil import now_ms


def _generation(raw: object) -> int:
    return 0 if raw is None else int(cast(str, raw))


class PortalStore:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def generation(self, app_id: str) -> int:
        return _generation(await self._redis.get(keys.portal_generation(app_id)))

    async def grant(self, app_id: str, capabilities: frozenset[Capability], expires_ms: int) -> str:
        """A new grant's token (shown once: Redis keeps its hash)."""
        token = new_token(app_id)
        key = keys.portal_grant(app_id, token_digest(token))
        generation = await self.generation(app_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                key,
                mapping={
                    "caps": ",".join(sorted(capabilities)),
                    "expires": expires_ms,
                    "gen": generation,
                },
            )
            pipe.pexpireat(key, expires_ms)
            await pipe.execute()
        return token

    async def revoke(self, app_id: str) -> int:
        """Every grant and session of the application dead at once; the new generation."""
        return int(await self._redis.incr(keys.portal_generation(app_id)))

    async def redeem(self, token: str) -> Grant | None:
        """The live grant ``token`` is for; None if it is no token, unknown, expired or
        revoked. Redeeming does not use it up: the link works until it expires."""
        app_id = token_application(token)
        if app_id is None:
            return None
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(keys.portal_grant(app_id, token_digest(token)))
            pipe.get(keys.portal_generation(app_id))
            raw, current = await pipe.execute()
        fields = cast(dict[str, str], raw)
        if not fields or int(fields["gen"]) != _generation(current):
            return None
        expires_ms = int(fields["expires"])
        if expires_ms <= now_ms():
            return None
        capabilities = frozenset(Capability(c) for c in fields["caps"].split(",") if c)
        return Grant(app_id, capabilities, expires_ms, int(fields["gen"]))

    async def open_session(self, grant: Grant, claims: SessionClaims) -> None:
        """Record a session opened from ``grant``, in the grant's generation, until the
        grant expires."""
        key = keys.portal_session(claims.app_id, claims.sid)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(key, grant.generation)
            pipe.pexpireat(key, claims.expires_ms)
            await pipe.execute()

    async def session_alive(self, claims: SessionClaims) -> bool:
        """Whether the session stands: not expired, not signed out, not revoked."""
        if claims.expires_ms <= now_ms():
            return False
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.get(keys.portal_session(claims.app_id, claims.sid))
            pipe.get(keys.portal_generation(claims.app_id))
            opened_in, current = await pipe.execute()
        return opened_in is not None and _generation(opened_in) == _generation(current)

    async def end_session(self, claims: SessionClaims) -> None:
        """Sign-out: the session's record gone, so its credential, and every copy of it, is
        refused from now on."""
        await self._redis.delete(keys.portal_session(claims.app_id, claims.sid))
