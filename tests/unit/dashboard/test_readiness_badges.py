"""The dashboard's system panel shows each /readyz check by its state: a log that lags is a
warning (the service still takes events), not a green "ok" nor a failure."""

from __future__ import annotations

from webhook_service.dashboard import endpoint_pages


def test_each_check_state_has_its_own_badge() -> None:
    ready = {
        "status": "ready",
        "checks": {
            "redis": {"ok": True, "state": "ok", "detail": "PONG"},
            "log": {"ok": True, "state": "lagging", "detail": "oldest record 90 s old"},
            "scheduler": {"ok": False, "state": "failing", "detail": "no pass for 40 s"},
        },
    }
    html = str(endpoint_pages._readiness(ready))
    assert '<span class="badge ok">redis</span>' in html
    assert '<span class="badge warn">log</span>' in html
    assert '<span class="badge bad">scheduler</span>' in html
