"""What refusing a hostile ingest body costs the event loop, against accepting a normal one.

    python -m bench.bench_refusals [--runs 7]

Each body goes through what ``api/body.py`` does before a model sees it: the container
count on the raw bytes, ``orjson.loads``, the shape walk. The baseline, measured in the
same run, is a typical 1 KiB event accepted; each hostile body is printed as a ratio to it.
The ``parse only`` row is what the same body would cost if it were parsed before it was
counted (the order before the container count existed).
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from collections.abc import Callable
from functools import partial

import orjson

from webhook_service.api.body import ShapeLimits, check_containers, check_shape
from webhook_service.api.problems import ProblemError
from webhook_service.config import Settings

LIMITS = ShapeLimits.of(Settings())


def _typical() -> bytes:
    data = {f"field_{n}": {"value": n, "label": f"item {n}"} for n in range(20)}
    return orjson.dumps({"type": "invoice.paid", "data": data})


def _empty_objects(count: int) -> bytes:
    return b'{"type": "a.b", "data": {"x": [' + b",".join([b"{}"] * count) + b"]}}"


def _one_key_objects(count: int) -> bytes:
    return b'{"type": "a.b", "data": {"x": [' + b",".join([b'{"k": 1}'] * count) + b"]}}"


def _bracket_strings() -> bytes:
    # Brackets that mean nothing, inside strings full of escapes: the costliest to count.
    text = b'{[\\"' * 60_000
    return b'{"type": "a.b", "data": {"s": "' + text + b'"}}'


def _ingest_checks(raw: bytes) -> None:
    try:
        check_containers(raw, LIMITS)
        check_shape(orjson.loads(raw), LIMITS)
    except ProblemError:
        pass


def _parse_only(raw: bytes) -> None:
    orjson.loads(raw)


def _median_ms(func: Callable[[], object], runs: int) -> float:
    timer = timeit.Timer(func)
    loops, _ = timer.autorange()
    return statistics.median(t / loops for t in timer.repeat(runs, loops)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    typical = _typical()
    baseline = _median_ms(lambda: _ingest_checks(typical), runs)
    cases = {
        "80 000 empty objects (refused)": _empty_objects(80_000),
        f"{LIMITS.nodes - 10} empty objects (accepted)": _empty_objects(LIMITS.nodes - 10),
        f"{LIMITS.nodes // 2 - 10} one-key objects (accepted)": _one_key_objects(
            LIMITS.nodes // 2 - 10
        ),
        "strings of brackets and escapes (accepted)": _bracket_strings(),
    }
    print(f"baseline: a {len(typical)} B event accepted, {baseline:.4f} ms")
    print(f"{'body':48} {'bytes':>8} {'ms':>9} {'x base':>8} {'parse only ms':>14}")
    for name, raw in cases.items():
        ms = _median_ms(partial(_ingest_checks, raw), runs)
        parse = _median_ms(partial(_parse_only, raw), runs)
        print(f"{name:48} {len(raw):8} {ms:9.3f} {ms / baseline:8.0f} {parse:14.3f}")


if __name__ == "__main__":
    main()
