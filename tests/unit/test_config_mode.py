"""WEBHOOK_MODE: tick mode as one switch, and what set explicitly still wins over it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from webhook_service.config import TICK_DEFAULTS, Settings
from webhook_service.store.liveness import Bounds

SECRET = "a-cron-secret-of-32-characters-x"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No WEBHOOK_* variable from the outside world leaks into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("WEBHOOK_"):
            monkeypatch.delenv(name)


def _tick(monkeypatch: pytest.MonkeyPatch, **more: str) -> Settings:
    monkeypatch.setenv("WEBHOOK_MODE", "tick")
    monkeypatch.setenv("WEBHOOK_CRON_SECRET", SECRET)
    for name, value in more.items():
        monkeypatch.setenv(f"WEBHOOK_{name.upper()}", value)
    return Settings()


def test_service_mode_is_the_default_and_changes_nothing() -> None:
    settings = Settings()
    assert settings.mode == "service"
    assert (settings.wake_workers, settings.wakeup_grace) == (True, 30.0)
    assert Bounds.of(settings).expects_senders


def test_tick_mode_alone_sets_what_tick_mode_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _tick(monkeypatch)
    assert settings.mode == "tick"
    # No wake-ups for workers that are not there; a new delivery due at once.
    assert (settings.wake_workers, settings.wakeup_grace) == (False, 0.0)
    assert {name: getattr(settings, name) for name in TICK_DEFAULTS} == TICK_DEFAULTS
    assert not Bounds.of(settings).expects_senders
    assert settings.cron_secret is not None and settings.cron_secret.get_secret_value() == SECRET


def test_the_mode_may_be_given_directly() -> None:
    settings = Settings(mode="tick", cron_secret=SECRET)
    assert (settings.wake_workers, settings.wakeup_grace) == (False, 0.0)


def test_an_explicit_grace_wins_over_the_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _tick(monkeypatch, wakeup_grace="2").wakeup_grace == 2.0
    # Said explicitly as the mode would: the same.
    assert _tick(monkeypatch, wake_workers="false").wake_workers is False


def test_tick_mode_without_the_cron_secret_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBHOOK_MODE", "tick")
    with pytest.raises(ValidationError, match="WEBHOOK_MODE=tick needs WEBHOOK_CRON_SECRET"):
        Settings()


def test_wake_ups_in_tick_mode_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # No worker runs to consume them: they would pile up in Redis.
    with pytest.raises(ValidationError, match="unset WEBHOOK_WAKE_WORKERS"):
        _tick(monkeypatch, wake_workers="true")


def test_a_grace_of_zero_is_tick_modes_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBHOOK_WAKEUP_GRACE", "0")
    with pytest.raises(ValidationError, match="may be 0 only with WEBHOOK_MODE=tick"):
        Settings()
    for bad in ("-1", "inf", "nan"):
        monkeypatch.setenv("WEBHOOK_WAKEUP_GRACE", bad)
        with pytest.raises(ValidationError):
            Settings()


@pytest.mark.parametrize("mode", ["Tick", "cron", "", "workers"])
def test_an_unknown_mode_is_refused(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setenv("WEBHOOK_MODE", mode)
    monkeypatch.setenv("WEBHOOK_CRON_SECRET", SECRET)
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert {e["loc"][0] for e in caught.value.errors()} == {"mode"}


def _run(role: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("WEBHOOK_")}
    return subprocess.run(
        [sys.executable, "-m", "webhook_service", role],
        # Port 1: nothing answers there, so a role that got as far as Redis would fail on it.
        env={**clean, "WEBHOOK_REDIS_URL": "redis://127.0.0.1:1/0", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_start_up_refuses_tick_mode_without_the_secret() -> None:
    started = _run("api", WEBHOOK_MODE="tick")
    assert started.returncode != 0
    assert "WEBHOOK_MODE=tick needs WEBHOOK_CRON_SECRET" in started.stderr


@pytest.mark.parametrize("role", ["worker", "scheduler"])
def test_tick_mode_runs_no_worker_and_no_scheduler(role: str) -> None:
    started = _run(role, WEBHOOK_MODE="tick", WEBHOOK_CRON_SECRET=SECRET)
    assert started.returncode == 1
    assert f"WEBHOOK_MODE=tick runs the API alone (POST /v1/cron/tick sends): no {role}" in (
        started.stdout + started.stderr
    )
