"""A rate limiter whose state lives in Redis, so one limit holds across every process.

It is the generic cell rate algorithm of ``common.lua`` (also used inside the lease script
for per-endpoint limits), run alone: one atomic script call per request, one string key per
limited name that expires once the limiter is idle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from webhook_service.store import keys
from webhook_service.store.scripts import Scripts


@dataclass(frozen=True)
class RateLimitArgs:
    """ratelimit.lua's arguments, in the order its head names them."""

    name: str
    rate_per_s: float
    burst: int

    def keys(self) -> list[str]:
        """The limiter's own key, of no bucket: the one key the script touches."""
        return [keys.limit(self.name)]

    def argv(self) -> list[str | int | float]:
        return [self.rate_per_s, self.burst]


class RateLimiter:
    def __init__(self, scripts: Scripts) -> None:
        self._scripts = scripts

    async def acquire(self, name: str, rate_per_s: float, burst: int) -> float:
        """Count one request against ``name``: 0.0 if it may go now, else the seconds until
        it would have been allowed (nothing is counted then).

        On average ``rate_per_s`` requests a second pass, and up to ``burst`` at once after
        an idle spell.
        """
        if not (math.isfinite(rate_per_s) and rate_per_s > 0) or burst < 1:
            raise ValueError("a rate limit needs a positive finite rate and a burst of >= 1")
        args = RateLimitArgs(name, rate_per_s, burst)
        wait_ms = await self._scripts.run("ratelimit", args.keys(), args.argv())
        return int(wait_ms) / 1000
