"""A delivery's states, in one place for Python and Lua (the scripts' FINAL preamble).

    pending ──attempt 2xx──▶ succeeded
       │ ──attempt fails, tries left──▶ pending (due again later)
       │ ──attempt fails, none left / endpoint or payload gone──▶ failed
       │ ──410 Gone, or its endpoint is disabled──▶ disabled
    succeeded | failed | disabled ──an admin's retry or a recovery──▶ pending

A final delivery (succeeded, failed, disabled) needs no worker: once the log holds it, it
leaves Redis (lua/release.lua), and a retry brings it back from the log.
"""

from __future__ import annotations

from typing import Literal

Status = Literal["pending", "succeeded", "failed", "disabled"]
STATUSES: tuple[Status, ...] = ("pending", "succeeded", "failed", "disabled")
FINAL_STATUSES: frozenset[Status] = frozenset({"succeeded", "failed", "disabled"})
