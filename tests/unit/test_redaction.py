"""Credentials are masked in every log record, whoever logs them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from webhook_service.config import Settings
from webhook_service.redaction import (
    MASK,
    Redactor,
    configured_secrets,
    install_log_redaction,
)

API_KEY = "whk_key_01KB0000000000000000000000_" + "ab" * 24


@pytest.fixture
def redacting() -> Iterator[None]:
    original = logging.getLogRecordFactory()
    install_log_redaction(["operator-chosen-admin-key"])
    yield
    logging.setLogRecordFactory(original)


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        (f"Authorization: Bearer {API_KEY}", API_KEY),
        ("authorization: bearer opaque-token-123", "opaque-token-123"),
        (f"GET /v1/endpoints?api_key={API_KEY} HTTP/1.1", API_KEY),
        ("secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        ("b'Bearer whk_key_X_aaaaaaaa...'", "whk_key_X_aaaaaaaa"),
        ("admin whadm_Zx1-_abcdefgh", "Zx1-_abcdefgh"),
    ],
)
def test_shapes_of_credentials_are_masked(text: str, leaked: str) -> None:
    redacted = Redactor()(text)
    assert leaked not in redacted
    assert MASK in redacted


def test_configured_secrets_are_masked_wherever_they_stand() -> None:
    redact = Redactor(["plain-secret-value", "short"])
    assert redact("x=plain-secret-value;") == f"x={MASK};"
    # Too short to be a secret worth a blanket replacement.
    assert redact("short") == "short"


def test_plain_text_is_left_alone() -> None:
    text = "POST /v1/events 202 whk_ (prefix only) whsec_short"
    assert Redactor()(text) == text


def test_configured_secrets_are_every_secret_setting() -> None:
    settings = Settings(
        admin_key=SecretStr("the-admin-key-1-of-at-least-32-chars"),
        master_key=SecretStr("master-key-value"),
        previous_master_keys=SecretStr("older-key-one, older-key-two"),
        redis_url="redis://default:redis-password@db:6379/0",
    )
    assert set(configured_secrets(settings)) >= {
        "the-admin-key-1-of-at-least-32-chars", "master-key-value", "older-key-one",
        "older-key-two", "redis-password",
    }  # fmt: skip


def test_log_records_are_redacted_as_they_are_made(
    redacting: None, caplog: pytest.LogCaptureFixture
) -> None:
    log = logging.getLogger("test.redaction")
    with caplog.at_level(logging.INFO, logger="test.redaction"):
        log.info("header %s and %s", f"Bearer {API_KEY}", "operator-chosen-admin-key")
        try:
            raise ValueError(f"bad line b'Bearer {API_KEY}'")
        except ValueError:
            log.exception("parse failed")
    text = caplog.text
    assert "header Bearer ***" in text
    assert "ValueError: bad line" in text  # the traceback is still there, masked
    assert API_KEY not in text
    assert "operator-chosen-admin-key" not in text


def test_a_second_install_adds_secrets_without_wrapping_twice(
    redacting: None, caplog: pytest.LogCaptureFixture
) -> None:
    factory = logging.getLogRecordFactory()
    install_log_redaction(["another-secret-value"])
    assert logging.getLogRecordFactory() is factory
    with caplog.at_level(logging.INFO, logger="test.redaction"):
        logging.getLogger("test.redaction").info("another-secret-value operator-chosen-admin-key")
    assert caplog.records[-1].getMessage() == f"{MASK} {MASK}"


def test_a_bad_format_string_is_left_for_logging_to_report(redacting: None) -> None:
    make = logging.getLogRecordFactory()
    record = make("test.redaction", logging.INFO, __file__, 1, "two %s %s", ("one",), None)
    assert (record.msg, record.args) == ("two %s %s", ("one",))
