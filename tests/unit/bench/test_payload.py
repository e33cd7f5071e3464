"""Bodies of a chosen size, measured as the API stores and sends them."""

from __future__ import annotations

import orjson
import pytest

from bench.payload import envelope, event_data
from webhook_service.timeutil import iso


@pytest.mark.parametrize("size", [100, 250])
def test_the_stored_body_has_the_size_asked_for(size: int) -> None:
    data = event_data("bench.log", size)
    # The envelope the API builds (api/events.py), with a real timestamp.
    stored = orjson.dumps({"type": "bench.log", "timestamp": iso(1_764_600_000_123), "data": data})
    assert len(stored) == len(envelope("bench.log", data)) == size


def test_a_size_below_the_bare_envelope_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        event_data("bench.log", 20)
