"""A delivery page keeps reloading until the log holds every attempt its state counts:
the state is Redis's at once, the attempts the log's a moment later."""

from __future__ import annotations

from webhook_service.dashboard.delivery_pages import _log_behind


def test_the_page_follows_the_log_until_it_has_every_attempt() -> None:
    assert _log_behind({"attempts": 5, "attempt_log": [{}] * 4})
    assert not _log_behind({"attempts": 5, "attempt_log": [{}] * 5})
    assert not _log_behind({"attempts": 0, "attempt_log": []})
