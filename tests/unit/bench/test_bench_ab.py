"""bench_ab's table: medians per side, and each round's ratio paired with its own base."""

from __future__ import annotations

from bench.bench_ab import table


def _run(rate: float, worker: float, valkey: float) -> dict[str, float]:
    return {"rate": rate, "worker_cpu_ms": worker, "valkey_cpu_ms": valkey,
            "ingest_api_cpu_ms": 2 * worker, "ingest_valkey_cpu_ms": valkey}  # fmt: skip


def test_the_paired_ratio_is_the_median_of_each_rounds_own_ratio() -> None:
    # The machine drifts: round 2 is slower for both sides. Medians alone would say 1.0x
    # for the worker; each round's pair says 0.8x.
    by_endpoints = {
        "1": {
            "base": [_run(100, 1.0, 0.2), _run(100, 2.0, 0.2), _run(100, 0.5, 0.2)],
            "this": [_run(110, 0.8, 0.2), _run(120, 1.6, 0.2), _run(100, 0.4, 0.2)],
        }
    }
    rows, paired = table(by_endpoints, "abc123")
    assert [r.figure for r in rows] == [
        "deliveries/s, 1 endpoint(s)",
        "worker CPU per delivery, 1 endpoint(s)",
        "Valkey CPU per delivery, 1 endpoint(s)",
        "API CPU per event ingested, 1 endpoint(s)",
        "Valkey CPU per event ingested, 1 endpoint(s)",
    ]
    worker = rows[1]
    assert worker.ours["median"] == 0.8 and worker.baseline is not None
    assert worker.baseline["median"] == 1.0 and worker.baseline_name == "abc123"
    assert paired == [
        "deliveries/s, 1 endpoint(s): this / base 1.10 paired",
        "worker CPU per delivery, 1 endpoint(s): this / base 0.80 paired",
        "Valkey CPU per delivery, 1 endpoint(s): this / base 1.00 paired",
        "API CPU per event ingested, 1 endpoint(s): this / base 0.80 paired",
        "Valkey CPU per event ingested, 1 endpoint(s): this / base 1.00 paired",
    ]
