"""The chaos tests use the integration fixtures (API in-process, receiver, the PostgreSQL of
the session) on stacks of their own."""

import pytest

from tests.integration.conftest import api, receiver
from tests.support.postgres import postgres

__all__ = ["api", "postgres", "receiver"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak-seconds",
        type=float,
        default=60.0,
        help="how long the soak (tests/chaos/test_soak.py) sends its load; make soak: 1800",
    )
