"""The applications' isolation tests (tests/integration/test_applications.py) again, on a
Valkey Cluster of 3 primaries with a replica each, the broker apart: thirty applications
each get exactly their own events, and a key bound to one application finds nothing of
another's through any route. Their buckets, and so their keys, are spread over the three
primaries; what isolates them must not depend on sharing one server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.test_applications import (
    test_a_bound_key_finds_nothing_of_another_application,
    test_thirty_applications_each_get_exactly_their_own_events,
    two_tenants,
)
from tests.support.cluster import Cluster, running
from tests.support.cluster_service import service_on
from tests.support.stack import Stack

__all__ = [
    "test_a_bound_key_finds_nothing_of_another_application",
    "test_thirty_applications_each_get_exactly_their_own_events",
    "two_tenants",
]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running(tmp_path_factory.mktemp("isolation"), aof=True, replicas=1) as formed:
        yield formed


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster) -> Iterator[Stack]:
    """The conftest's stack, on the cluster: the API fixture serves in-process on it."""
    with service_on(cluster, tmp_path_factory.mktemp("stack")) as running_stack:
        yield running_stack
