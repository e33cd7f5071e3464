"""WEBHOOK_LOG_READ_URL: the history read from a standby of the PostgreSQL log, or from the
log itself; a URL no standby of it could have is refused before any engine is made."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from webhook_service.config import Settings
from webhook_service.history.database import LogUnconfigured, log_url, read_url

PRIMARY = "postgresql://whs:primary-secret@db-primary:5432/whs_log"
STANDBY = "postgresql://whs:standby-secret@db-standby:5432/whs_log"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No WEBHOOK_* variable from the outside world leaks into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("WEBHOOK_"):
            monkeypatch.delenv(name)


def _settings(tmp_path: Path, log: str | None, read: str | None) -> Settings:
    return Settings(
        data_dir=tmp_path,
        log_url=None if log is None else SecretStr(log),
        log_read_url=None if read is None else SecretStr(read),
    )


@pytest.mark.parametrize("log", [None, PRIMARY])
def test_unset_the_history_is_read_from_the_log_itself(tmp_path: Path, log: str | None) -> None:
    settings = _settings(tmp_path, log, None)
    assert read_url(settings) == log_url(settings)


@pytest.mark.parametrize(
    "standby", [STANDBY, STANDBY.replace("postgresql:", "postgresql+psycopg:")]
)
def test_a_standby_of_the_postgresql_log_is_read_without_its_driver(
    tmp_path: Path, standby: str
) -> None:
    url = read_url(_settings(tmp_path, PRIMARY, standby))
    assert (url.drivername, url.host, url.database) == ("postgresql", "db-standby", "whs_log")
    # The log itself is still the primary: what writes goes there.
    assert log_url(_settings(tmp_path, PRIMARY, standby)).host == "db-primary"


@pytest.mark.parametrize("log", [None, "sqlite:///var/log.sqlite3"])
def test_refused_unless_the_log_is_postgresql(tmp_path: Path, log: str | None) -> None:
    with pytest.raises(LogUnconfigured, match="needs WEBHOOK_LOG_URL=postgresql://") as refused:
        read_url(_settings(tmp_path, log, STANDBY))
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize(
    ("standby", "scheme"),
    [
        ("mysql://whs:standby-secret@db-standby/whs_log", "mysql"),
        ("sqlite:///var/standby.sqlite3", "sqlite"),
        ("redis://:standby-secret@db-standby:6379", "redis"),
    ],
)
def test_refused_unless_the_standby_is_postgresql(
    tmp_path: Path, standby: str, scheme: str
) -> None:
    expected = f"WEBHOOK_LOG_READ_URL must be postgresql://…, not {scheme}://"
    with pytest.raises(LogUnconfigured) as refused:
        read_url(_settings(tmp_path, PRIMARY, standby))
    assert str(refused.value) == expected


def test_the_logs_own_url_is_checked_as_before(tmp_path: Path) -> None:
    with pytest.raises(LogUnconfigured) as refused:
        log_url(_settings(tmp_path, "mysql://whs@db/whs_log", None))
    assert str(refused.value) == (
        "WEBHOOK_LOG_URL must be sqlite:///<file> or postgresql://…, not mysql://"
    )
