"""A delivery's states, in one place for Python and Lua (the scripts' FINAL preamble).

    pending ──attempt 2xx──▶ succeeded
       │ ──attempt fails, tries left──▶ pending (due again later)
       │ ──attempt fails, none left / endpoint or payload gone──▶ failed
       │ ──410 Gone, or its endpoint is disabled──▶ disabled
    succeeded | failed | disabled ──an admin's retry or a recovery──▶ pending

A final delivery (succeeded, failed, disabled) needs no worker: once the log holds it, it
leaves Redis (lua/release.lua), and a retry brings it back from the log.

``scheduled`` is how a pending delivery of an event with a deliver_at is shown, to readers
and in the log, until its first attempt: for the scripts it is ``pending`` (due at its
time, leased and ended as any other), so no script learns a state of its own. Its hash
keeps ``sched`` (its time) beside ``next_at``; its first attempt, or a retry that moves
next_at elsewhere, ends the showing (``shown_status``). Cancelling its schedule
(lua/schedule_cancel.lua) ends it ``failed`` with last_error ``cancelled``, by the path an
application's deletion ends unsent deliveries: a final state every reader, metric and the
log's release know already, and one an admin's retry sends again.
"""

from __future__ import annotations

from typing import Literal

Status = Literal["pending", "scheduled", "succeeded", "failed", "disabled"]
STATUSES: tuple[Status, ...] = ("pending", "scheduled", "succeeded", "failed", "disabled")
FINAL_STATUSES: frozenset[Status] = frozenset({"succeeded", "failed", "disabled"})
# Still in Redis's hands: a reader takes Redis's fresher state over the log's.
LIVE_STATUSES: frozenset[Status] = frozenset({"pending", "scheduled"})
# The last_error of a delivery whose schedule was cancelled before its first attempt.
CANCELLED = "cancelled"


def shown_status(status: Status, attempts: int, next_at: str | None, sched: str | None) -> Status:
    """A delivery's status as shown, from its hash's fields: ``scheduled`` while it is
    pending, never attempted and still due at the time it was scheduled for."""
    if status == "pending" and attempts == 0 and sched is not None and next_at == sched:
        return "scheduled"
    return status
