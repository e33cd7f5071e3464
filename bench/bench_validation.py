"""Schema validation at ingest (issue 17): what checking an event's ``data`` against its
catalog type's schema costs, against the issue's bound of 20 % of ingest CPU.

    python -m bench.bench_validation [--events 5000] [--rounds 6] [--repeats 5]

About a minute. Two parts:

1. **Per validation**, in this process: a 1 KiB ``data`` (valid) against a 20-property
   schema, µs per validation (median of ``--repeats`` timings of a few thousand each) for
   jsonschema-rs (as ingest runs it: ``CompiledSchema.violations``, webhook_service/
   event_schemas.py), fastjsonschema (the same schema as draft-07: it has no 2020-12) and
   jsonschema (Python, 2020-12); and what a failing payload costs jsonschema-rs with its
   pointers.
2. **Per ingested event**, on the bench rig (Valkey with AOF, the API and the scheduler as
   real processes, no worker; bench/rig.py): one API process with
   ``WEBHOOK_VALIDATE_EVENTS=enforce``; each round a run of a catalog type with the
   schema and one of a type without (the same payload, 3 endpoints subscribed to each),
   each first in every other round, each ``--events`` events on 8 connections as fast as
   it answers; the API's CPU per 202 (``/proc``), so the difference is the validation and
   nothing else. Prints each validator's µs as a share of that ingest CPU, and the
   measured ratio.

Writes ``bench/results/validation.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastjsonschema  # compared in the bench only
import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import orjson

from bench.api_cpu import cpu_rounds
from bench.http_load import build_request
from bench.rig import Rig
from bench.run import RESULTS, machine
from webhook_service.event_schemas import compile_schema

TARGET_SHARE = 0.20
DATA_BYTES = 1024
WITH_SCHEMA = "bench.validated"
WITHOUT_SCHEMA = "bench.unchecked"


def schema_of_20() -> dict[str, Any]:
    """20 properties of the kinds event payloads have: ids, amounts, flags, an enum, a
    date-time, a nested object, a list."""
    props: dict[str, Any] = {}
    for i in range(6):
        props[f"id_{i}"] = {"type": "string", "minLength": 1, "maxLength": 200}
    for i in range(4):
        props[f"amount_{i}"] = {"type": "integer", "minimum": 0}
    for i in range(3):
        props[f"ratio_{i}"] = {"type": "number", "minimum": 0, "maximum": 1}
    props["paid"] = {"type": "boolean"}
    props["status"] = {"enum": ["open", "paid", "void", "uncollectible"]}
    props["currency"] = {"type": "string", "pattern": "^[A-Z]{3}$"}
    props["created"] = {"type": "string", "format": "date-time"}
    props["customer"] = {
        "type": "object",
        "required": ["id", "email"],
        "properties": {"id": {"type": "string"}, "email": {"type": "string"}},
    }
    props["lines"] = {"type": "array", "items": {"type": "string"}, "maxItems": 50}
    props["note"] = {"type": ["string", "null"]}
    return {"type": "object", "required": sorted(props)[:10], "properties": props}


def payload_1k() -> dict[str, Any]:
    data: dict[str, Any] = {f"id_{i}": f"obj_{i:024d}" for i in range(6)}
    data |= {f"amount_{i}": 1999 * (i + 1) for i in range(4)}
    data |= {f"ratio_{i}": 0.25 * i for i in range(3)}
    data |= {"paid": True, "status": "paid", "currency": "EUR"}
    data |= {"created": "2026-12-02T00:00:00Z"}
    data["customer"] = {"id": "cus_0000000000000001", "email": "billing@example.com"}
    data["lines"] = [f"line item {i:03d}" for i in range(8)]
    data["note"] = ""
    data["note"] = "x" * (DATA_BYTES - len(orjson.dumps(data)))
    assert len(orjson.dumps(data)) == DATA_BYTES
    return data


def per_call_us(call: Callable[[], object], repeats: int, number: int = 3000) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(number):
            call()
        timings.append((time.perf_counter() - started) / number * 1e6)
    return statistics.median(timings)


def micro(repeats: int) -> dict[str, float]:
    schema, data = schema_of_20(), payload_1k()
    bad = {**data, "amount_0": "12", "customer": {"id": 1}}
    ours = compile_schema(schema)
    assert not ours.violations(data) and len(ours.violations(bad)) == 3
    draft7 = fastjsonschema.compile(
        {**schema, "$schema": "http://json-schema.org/draft-07/schema#"}
    )
    python = jsonschema.Draft202012Validator(schema)
    assert python.is_valid(data)
    return {
        "jsonschema_rs_us": per_call_us(lambda: ours.violations(data), repeats),
        "jsonschema_rs_failing_us": per_call_us(lambda: ours.violations(bad), repeats),
        "fastjsonschema_draft7_us": per_call_us(lambda: draft7(data), repeats),
        "jsonschema_us": per_call_us(lambda: python.is_valid(data), repeats, number=300),
    }


async def ingest(events: int, rounds: int) -> dict[str, Any]:
    # Kept when the run fails, for its processes' logs.
    directory = Path(tempfile.mkdtemp(prefix="bench-validation-"))
    rig = await Rig.start(
        directory, log_level="WARNING", settings={"WEBHOOK_VALIDATE_EVENTS": "enforce"}
    )
    try:
        cpu = await _rounds_of_ingest(rig, events, rounds)
    finally:
        await rig.close()
    shutil.rmtree(directory)
    checked = statistics.median(cpu[WITH_SCHEMA])
    plain = statistics.median(cpu[WITHOUT_SCHEMA])
    return {
        "api_cpu_us_per_event_with_schema": checked,
        "api_cpu_us_per_event_without": plain,
        "rounds_with": cpu[WITH_SCHEMA],
        "rounds_without": cpu[WITHOUT_SCHEMA],
        "measured_ratio": checked / plain,
        # Round by round: each round's two runs were next to each other in time.
        "median_round_ratio": statistics.median(
            w / u for w, u in zip(cpu[WITH_SCHEMA], cpu[WITHOUT_SCHEMA], strict=True)
        ),
    }


async def _rounds_of_ingest(rig: Rig, events: int, rounds: int) -> dict[str, list[float]]:
    """The API's CPU µs per 202 of each round, by type."""
    await rig.api("POST", "/v1/event-types", {"name": WITH_SCHEMA, "schema": schema_of_20()})
    await rig.api("POST", "/v1/event-types", {"name": WITHOUT_SCHEMA})
    for name in ("a", "b", "c"):
        await rig.endpoints([f"{name}-v"], WITH_SCHEMA)
        await rig.endpoints([f"{name}-u"], WITHOUT_SCHEMA)
    data = payload_1k()
    kinds = {kind: _request(rig, kind, data) for kind in (WITH_SCHEMA, WITHOUT_SCHEMA)}
    return await cpu_rounds(rig, kinds, events, rounds)


def _request(rig: Rig, event_type: str, data: dict[str, Any]) -> Callable[[int], bytes]:
    body = orjson.dumps({"type": event_type, "data": data})
    headers = {"Authorization": f"Bearer {rig.admin_key}", "Content-Type": "application/json"}
    request = build_request("POST", "/v1/events", rig.api_port, body, headers)
    return lambda _i: request


def report(figures: dict[str, Any]) -> list[str]:
    plain = figures["ingest"]["api_cpu_us_per_event_without"]
    lines = [f"ingest, API CPU per event without a schema: {plain:.0f} µs (median of rounds)"]
    for name, key in (
        ("jsonschema-rs", "jsonschema_rs_us"),
        ("jsonschema-rs, failing (3 pointers)", "jsonschema_rs_failing_us"),
        ("fastjsonschema (draft-07 only)", "fastjsonschema_draft7_us"),
        ("jsonschema (Python)", "jsonschema_us"),
    ):
        us = figures["micro"][key]
        share = us / plain
        verdict = "within" if share <= TARGET_SHARE else "OVER"
        lines.append(
            f"{name:38} {us:8.1f} µs / validation = {100 * share:5.1f} % of ingest CPU "
            f"({verdict} {100 * TARGET_SHARE:.0f} %)"
        )
    ratio = figures["ingest"]["measured_ratio"]
    lines.append(
        f"measured: API CPU per event with the schema / without = {ratio:.3f} "
        f"({100 * (ratio - 1):+.1f} %; median of the rounds' ratios "
        f"{figures['ingest']['median_round_ratio']:.3f}; rounds {_rounds(figures['ingest'])})"
    )
    return lines


def _rounds(ingest: dict[str, Any]) -> str:
    pairs = zip(ingest["rounds_with"], ingest["rounds_without"], strict=True)
    return ", ".join(f"{w:.0f}/{u:.0f}" for w, u in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, Any] = {"machine": machine(), "micro": micro(args.repeats)}
    figures["ingest"] = asyncio.run(ingest(args.events, args.rounds))
    for line in report(figures):
        print(line)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "validation.json").write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
