"""aioresponses helpers shared by the unit tests of the HTTP edge."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import aiohttp
from yarl import URL


class CompatResponse(aiohttp.ClientResponse):
    """aioresponses 0.7.9 predates aiohttp 3.14's required ``stream_writer`` argument.

    Upstream: https://github.com/pnuckowski/aioresponses/issues/289 -- drop this once a
    release passes it.
    """

    def __init__(self, method: str, url: URL, **kwargs: Any) -> None:
        kwargs.setdefault("stream_writer", SimpleNamespace(output_size=0))
        super().__init__(method, url, **kwargs)
