"""Throughput of signer against the reference ``standardwebhooks`` library.

    python bench/bench_signer.py [--runs 5] [--out bench/results/signer.json]

Each case is timed ``runs`` times, ours and theirs interleaved so that clock
and thermal drift hit both alike; the median ops/s is reported. Ed25519 rows
have no reference figure: ``standardwebhooks`` only implements HMAC.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    # Run as a script, only bench/ is on sys.path; signer lives at the repo root.
    sys.path.insert(0, str(ROOT))

from standardwebhooks.webhooks import Webhook  # noqa: E402

from signer import Signer, Verifier, generate_keypair, generate_secret  # noqa: E402

DEFAULT_OUT = ROOT / "bench" / "results" / "signer.json"
SIZES = (1024, 64 * 1024)
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
# Long enough to average out timer noise, short enough for the whole run to stay ~15 s.
TARGET_SECONDS = 0.15

Bench = Callable[[], object]


def _body(size: int) -> bytes:
    # The reference verify() decodes the body as UTF-8, so the body must be text.
    return b'{"pad": "' + b"x" * (size - 11) + b'"}'


def _loops(func: Bench) -> int:
    timer = timeit.Timer(func)
    loops, elapsed = timer.autorange()
    return max(1, int(loops * TARGET_SECONDS / elapsed))


def _measure(funcs: Sequence[Bench], runs: int) -> list[float]:
    """Median ops/s of each function, timed in interleaved rounds."""
    loops = [_loops(func) for func in funcs]
    samples: list[list[float]] = [[] for _ in funcs]
    for _ in range(runs):
        for func, count, sink in zip(funcs, loops, samples, strict=True):
            sink.append(count / timeit.Timer(func).timeit(count))
    return [statistics.median(sink) for sink in samples]


def _cases() -> list[tuple[str, str, int, Bench, Bench | None]]:
    secret = generate_secret(24)
    private, public = generate_keypair()
    ours_hmac = Signer([secret])
    ours_ed = Signer([private])
    verify_hmac = Verifier([secret])
    verify_ed = Verifier([public])
    theirs = Webhook(secret)
    cases: list[tuple[str, str, int, Bench, Bench | None]] = []
    for size in SIZES:
        body = _body(size)
        text = body.decode()
        now = int(time.time())
        when = datetime.fromtimestamp(now, tz=UTC)
        hmac_headers = ours_hmac.headers(MSG_ID, now, body)
        ed_headers = ours_ed.headers(MSG_ID, now, body)
        cases += [
            (
                "sign",
                "hmac",
                size,
                partial(ours_hmac.signature, MSG_ID, now, body),
                partial(theirs.sign, MSG_ID, when, text),
            ),
            (
                "verify",
                "hmac",
                size,
                partial(verify_hmac.verify, body, hmac_headers),
                # json_parse=False: parsing is not verification, and ours does not parse.
                partial(theirs.verify, body, hmac_headers, json_parse=False),
            ),
            ("sign", "ed25519", size, partial(ours_ed.signature, MSG_ID, now, body), None),
            ("verify", "ed25519", size, partial(verify_ed.verify, body, ed_headers), None),
        ]
    return cases


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'operation':<9} {'key':<8} {'body':>7} {'ours ops/s':>12} {'theirs ops/s':>13}"
        f" {'ours/theirs':>11}"
    ]
    for row in rows:
        theirs = row["theirs_ops_per_s"]
        ratio = row["ratio"]
        lines.append(
            f"{row['operation']:<9} {row['key']:<8} {row['body_bytes'] // 1024:>5}Ki"
            f" {row['ours_ops_per_s']:>12,.0f}"
            f" {'—' if theirs is None else f'{theirs:,.0f}':>13}"
            f" {'—' if ratio is None else f'{ratio:.2f}x':>11}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed rounds per case (median)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results file")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for operation, key, size, ours, theirs in _cases():
        funcs = [ours] if theirs is None else [ours, theirs]
        rates = _measure(funcs, args.runs)
        rows.append(
            {
                "operation": operation,
                "key": key,
                "body_bytes": size,
                "ours_ops_per_s": round(rates[0]),
                "theirs_ops_per_s": round(rates[1]) if theirs is not None else None,
                "ratio": round(rates[0] / rates[1], 3) if theirs is not None else None,
            }
        )
    result: dict[str, Any] = {
        "benchmark": "signer vs standardwebhooks",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "runs": args.runs,
        "statistic": "median ops/s",
        "seconds": round(time.perf_counter() - started, 1),
        "results": rows,
    }
    print(_table(rows))
    slower = [row for row in rows if row["ratio"] is not None and row["ratio"] < 1]
    if slower:
        print(f"WARNING: ours is slower in {len(slower)} case(s)", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out} in {result['seconds']} s")
    return result


if __name__ == "__main__":
    main()
