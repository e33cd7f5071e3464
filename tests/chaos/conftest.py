"""The chaos tests use the integration fixtures (API in-process, receiver) on stacks of
their own."""

from tests.integration.conftest import api, receiver

__all__ = ["api", "receiver"]
