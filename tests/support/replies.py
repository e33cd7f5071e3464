"""What a decoding client's replies are, said once for the tests.

redis-py types a reply as whatever any client could get back: GET and HGET as
`bytes | str | None` (bytes unless the client was made with decode_responses=True), ZRANGE
as members or (member, score) pairs (with withscores=True). The tests' clients decode, so
these narrow a reply to what it is; they only cast, and check nothing at run time.
"""

from __future__ import annotations

from typing import cast

from redis.typing import ZSetRangeResponse


def text(reply: bytes | str | None) -> str | None:
    """A GET or HGET reply of a client made with decode_responses=True."""
    return cast(str | None, reply)


def members(reply: ZSetRangeResponse) -> list[str]:
    """A ZRANGE reply, without scores, of a client made with decode_responses=True."""
    return cast(list[str], reply)
