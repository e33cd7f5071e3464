"""The API process's CPU per accepted event, for two or more kinds of ingest compared in
one run: what bench_validation (a schema against none) and bench_filters (filtered
endpoints against none) measure."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bench.http_load import closed_loop
from bench.rig import Rig

# One request body a call: the load's n-th request.
Requests = Callable[[int], bytes]
WARM_UP = 300  # requests of each kind first: scripts loaded, connections open, caches full


async def cpu_rounds(
    rig: Rig, kinds: Mapping[str, Requests], events: int, rounds: int
) -> dict[str, list[float]]:
    """The API's CPU µs per 202 of each round, by kind. The kinds take turns going first,
    and the shipper is done before each run, so none runs in another's wake (the scheduler
    shipping its log records, an AOF growing)."""
    api = rig.children["api"]
    cpu: dict[str, list[float]] = {name: [] for name in kinds}
    for requests in kinds.values():
        await closed_loop(rig.api_port, requests, connections=8, count=WARM_UP)
    names = list(kinds)
    for i in range(rounds):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            await rig.until_shipped()
            before = api.cpu_seconds()
            load = await closed_loop(rig.api_port, kinds[name], connections=8, count=events)
            accepted = load.statuses.get(202, 0)
            if accepted != events:
                raise RuntimeError(
                    f"{name}: {accepted} of {events} accepted, answers {dict(load.statuses)}; "
                    f"see api.log in {rig.directory}"
                )
            cpu[name].append((api.cpu_seconds() - before) / accepted * 1e6)
    return cpu
