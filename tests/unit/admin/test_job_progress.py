"""The bulk-job progress bar: drawn in place on a terminal, silent anywhere else."""

from __future__ import annotations

import io

from webhook_service.admin import views
from webhook_service.admin.progress import JobProgress, bar, progress_line


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def job(state: str, matched: int, retried: int) -> dict[str, object]:
    return {"id": "job_1", "kind": "retry", "state": state, "matched": matched,
            "retried": retried}  # fmt: skip


def test_bar_fills_in_proportion_and_never_overflows() -> None:
    assert bar(0, 10, 10) == "[..........]"
    assert bar(5, 10, 10) == "[#####.....]"
    assert bar(12, 10, 10) == "[##########]"


def test_a_finished_job_with_nothing_found_shows_a_full_bar() -> None:
    assert "[" + "#" * 30 + "]" in progress_line(job("done", 0, 0), 1.0, 0)
    assert "[" + "." * 30 + "]" in progress_line(job("running", 0, 0), 1.0, 0)


def test_the_line_names_the_job_and_its_counts() -> None:
    line = progress_line(job("running", 200, 50), 2.5, 1)
    assert line.startswith("retry job_1 [")
    assert "re-sent 50 of 200 found" in line and "2.5s" in line and line.endswith("/")


def test_it_redraws_one_line_on_a_terminal_and_ends_it_when_done() -> None:
    stream = Terminal()
    times = iter([0.0, 0.5, 1.0])
    progress = JobProgress(stream, clock=lambda: next(times))
    progress(job("running", 10, 2))
    progress(job("done", 10, 10))
    out = stream.getvalue()
    assert out.count("\r") == 2 and out.endswith("\n") and out.count("\n") == 1
    assert "re-sent 10 of 10 found  1.0s done" in out


def test_it_writes_nothing_when_not_on_a_terminal() -> None:
    stream = io.StringIO()
    JobProgress(stream)(job("done", 1, 1))
    assert stream.getvalue() == ""


DELETION = {
    "id": "job_2", "kind": "delete-application", "state": "running", "matched": 0,
    "retried": 0, "application": "app_1", "step": "history", "endpoints_deleted": 3,
    "deliveries_ended": 7, "events_purged": 120, "deliveries_purged": 360,
    "attempts_purged": 400, "api_keys_revoked": 1,
}  # fmt: skip


def test_a_deletion_says_its_step_and_counts_and_nothing_of_re_sending() -> None:
    line = progress_line(DELETION, 3.0, 0)
    assert line.startswith("delete-application job_2 history: 7 deliveries ended, ")
    assert "3 endpoints deleted" in line and "120 events purged" in line
    assert "1 keys revoked" in line and "re-sent" not in line and "[" not in line
    shown = views.job_fields({**DELETION, "state": "done", "step": "done"})
    assert "application        app_1" in shown and "attempts purged    400" in shown
    assert "found" not in shown and "re-sent" not in shown
