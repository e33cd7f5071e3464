from __future__ import annotations

from collections.abc import Iterator

import pytest
from aioresponses import aioresponses


@pytest.fixture
def http() -> Iterator[aioresponses]:
    with aioresponses() as mocked:
        yield mocked
