"""A one-line progress bar for bulk jobs (bulk retry, recovery), redrawn in place.

A job scans the history a page at a time, so its total is not known up front: the bar
shows how many of the deliveries found so far were re-sent, and the count found grows.
An application's deletion has no bar: its line names the step it is at and what it has
ended, deleted and purged so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

SPINNER = "|/-\\"


# What a deletion job (delete-application) has done so far, in the order it does it.
DELETION_COUNTS = (
    ("deliveries_ended", "deliveries ended"),
    ("endpoints_deleted", "endpoints deleted"),
    ("events_purged", "events purged"),
    ("deliveries_purged", "deliveries purged"),
    ("attempts_purged", "attempts purged"),
    ("api_keys_revoked", "keys revoked"),
)


def deletion_counts(job: dict[str, Any]) -> str:
    return ", ".join(f"{job.get(name, 0)} {label}" for name, label in DELETION_COUNTS)


def bar(done: int, total: int, size: int = 30) -> str:
    filled = min(size, done * size // max(total, 1))
    return "[" + "#" * filled + "." * (size - filled) + "]"


def progress_line(job: dict[str, Any], elapsed: float, tick: int) -> str:
    running = job["state"] != "done"
    mark = SPINNER[tick % len(SPINNER)] if running else "done"
    if "step" in job:
        # An application's deletion: steps in order, each with its own count, no total.
        return (
            f"{job['kind']} {job['id']} {job['step']}: {deletion_counts(job)}  "
            f"{elapsed:.1f}s {mark}"
        )
    matched, retried = job["matched"], job["retried"]
    # Nothing found yet: empty while scanning, full once the scan found nothing at all.
    shown = bar(retried, matched) if matched else bar(0 if running else 1, 1)
    return (
        f"{job['kind']} {job['id']} {shown} "
        f"re-sent {retried} of {matched} found  {elapsed:.1f}s {mark}"
    )


class JobProgress:
    """Call it with each state of a job; it draws on ``stream`` only when that is a terminal,
    so output piped to a file or another program stays clean."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self._clock = clock
        self._started = clock()
        self._tick = 0
        self._live = stream.isatty()

    def __call__(self, job: dict[str, Any]) -> None:
        if not self._live:
            return
        line = progress_line(job, self._clock() - self._started, self._tick)
        self._tick += 1
        end = "\n" if job["state"] == "done" else ""
        # Clear to the end of the line: a shorter line must not leave the old one's tail.
        self._stream.write("\r" + line + "\x1b[K" + end)
        self._stream.flush()
