"""Settings from WEBHOOK_* environment variables: the retry schedule and the allow-list."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from webhook_service.config import DEFAULT_RETRY_SCHEDULE, Settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No WEBHOOK_* variable from the outside world leaks into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("WEBHOOK_"):
            monkeypatch.delenv(name)


def test_defaults() -> None:
    settings = Settings()
    assert settings.retry_schedule == DEFAULT_RETRY_SCHEDULE
    assert settings.max_attempts == len(DEFAULT_RETRY_SCHEDULE)
    assert settings.allowed_networks == ()
    assert settings.retry_jitter == 0.2
    assert settings.throttle_floor == 60.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0,1.5,2", (0.0, 1.5, 2.0)),
        (" 0 , 1.5 , 2 ", (0.0, 1.5, 2.0)),
        ("0,1.5,2,", (0.0, 1.5, 2.0)),
        ("0", (0.0,)),
        ("0,0,0", (0.0, 0.0, 0.0)),
        ("0,300,1e3", (0.0, 300.0, 1000.0)),
    ],
)
def test_retry_schedule_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: tuple[float, ...]
) -> None:
    monkeypatch.setenv("WEBHOOK_RETRY_SCHEDULE", text)
    settings = Settings()
    assert settings.retry_schedule == expected
    assert settings.max_attempts == len(expected)


@pytest.mark.parametrize(
    "text", ["-1", "0,-1.5,2", "", " ", ",", " , ", "soon", "0;1", "0 1", "30", "5,300"]
)
def test_bad_retry_schedules_are_rejected(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("WEBHOOK_RETRY_SCHEDULE", text)
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert {e["loc"][0] for e in caught.value.errors()} == {"retry_schedule"}


@pytest.mark.parametrize("text", ["nan", "0,nan", "inf", "0,5,1e400"])
def test_non_finite_retry_delays_are_rejected(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("WEBHOOK_RETRY_SCHEDULE", text)
    with pytest.raises(ValidationError):
        Settings()


def test_the_schedule_may_be_given_directly() -> None:
    assert Settings(retry_schedule=(0, 2)).retry_schedule == (0.0, 2.0)
    with pytest.raises(ValidationError):
        Settings(retry_schedule=())
    with pytest.raises(ValidationError):
        Settings(retry_schedule=(1, -2))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.0.0.0/8", ("10.0.0.0/8",)),
        ("10.0.0.0/8,192.168.0.0/16", ("10.0.0.0/8", "192.168.0.0/16")),
        (" 127.0.0.0/8 , ::1/128 ,", ("127.0.0.0/8", "::1/128")),
        ("", ()),
        (" , ", ()),
    ],
)
def test_allowed_networks_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: tuple[str, ...]
) -> None:
    monkeypatch.setenv("WEBHOOK_ALLOWED_NETWORKS", text)
    assert Settings().allowed_networks == expected


def test_allowed_networks_feed_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    from webhook_service.delivery.ssrf import Guard

    monkeypatch.setenv("WEBHOOK_ALLOWED_NETWORKS", "127.0.0.0/8, 10.1.0.0/16")
    guard = Guard(Settings().allowed_networks)
    assert guard.is_allowed_address("127.0.0.1")
    assert guard.is_allowed_address("10.1.2.3")
    assert not guard.is_allowed_address("10.2.0.1")


@pytest.mark.parametrize(("name", "value"), [("RETRY_JITTER", "1"), ("RETRY_JITTER", "-0.1")])
def test_jitter_must_be_in_0_to_1(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(f"WEBHOOK_{name}", value)
    with pytest.raises(ValidationError):
        Settings()


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.retry_schedule = (1.0,)  # type: ignore[misc]  # frozen: the refusal is the test


def test_the_admin_key_must_be_32_characters_or_more(monkeypatch: pytest.MonkeyPatch) -> None:
    short = "x" * 31
    monkeypatch.setenv("WEBHOOK_ADMIN_KEY", short)
    with pytest.raises(ValidationError) as caught:
        Settings()
    (error,) = caught.value.errors()
    assert error["loc"] == ("admin_key",) and "at least 32 characters" in error["msg"]
    # The refusal is printed at start-up: it never quotes the key.
    assert short not in str(caught.value)
    monkeypatch.setenv("WEBHOOK_ADMIN_KEY", "x" * 32)
    assert Settings().admin_key is not None
    monkeypatch.delenv("WEBHOOK_ADMIN_KEY")
    assert Settings().admin_key is None  # unset: the API refuses it on its own terms


def test_the_api_refuses_to_start_with_a_short_admin_key() -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("WEBHOOK_")}
    started = subprocess.run(
        [sys.executable, "-m", "webhook_service", "api"],
        env={**env, "WEBHOOK_ADMIN_KEY": "short-admin-key"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode != 0
    assert "WEBHOOK_ADMIN_KEY must be at least 32 characters" in started.stderr
    assert "short-admin-key" not in started.stderr
