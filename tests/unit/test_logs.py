"""Log lines: JSON or console, the ids from `extra`, and never a secret."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest

from webhook_service import logs
from webhook_service.config import Settings

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogRecordFactory())
    stream = io.StringIO()
    yield stream
    root.handlers, level, factory = saved
    root.setLevel(level)
    logging.setLogRecordFactory(factory)


def _setup(stream: io.StringIO, fmt: str) -> None:
    logs.setup(Settings(log_format=fmt, admin_key="whadm_" + "k" * 20), "worker")
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)


def test_json_lines_carry_ids_from_extra(captured: io.StringIO) -> None:
    _setup(captured, "json")
    logging.getLogger("webhook_service.test").info(
        "attempt recorded",
        extra={"delivery_id": "dlv_1", "event_id": "msg_1", "endpoint_id": "ep_1",
               "attempt": 2, "code": 503, "status": "pending", "unlisted": "dropped"},
    )  # fmt: skip
    line = orjson.loads(captured.getvalue().splitlines()[-1])
    assert line["message"] == "attempt recorded" and line["level"] == "INFO"
    assert (line["role"], line["logger"]) == ("worker", "webhook_service.test")
    assert (line["delivery_id"], line["event_id"], line["endpoint_id"]) == (
        "dlv_1",
        "msg_1",
        "ep_1",
    )
    assert (line["attempt"], line["code"], line["status"]) == (2, 503, "pending")
    assert "unlisted" not in line and "error" not in line
    assert line["time"].endswith("Z")


def test_json_lines_keep_tracebacks(captured: io.StringIO) -> None:
    _setup(captured, "json")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("t").exception("failed")
    line = orjson.loads(captured.getvalue().splitlines()[-1])
    assert "ValueError: boom" in line["exc"]


def test_console_lines_name_the_ids(captured: io.StringIO) -> None:
    _setup(captured, "console")
    logging.getLogger("t").warning("slow", extra={"endpoint_id": "ep_9"})
    logging.getLogger("t").warning("plain")
    first, second = captured.getvalue().splitlines()[-2:]
    assert " WARNING worker t slow [endpoint_id=ep_9]" in first
    assert second.endswith(" WARNING worker t plain")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_no_secret_reaches_a_line(captured: io.StringIO, fmt: str) -> None:
    _setup(captured, fmt)
    logging.getLogger("t").info("rotated to %s with Bearer %s", SECRET, "whadm_" + "k" * 20)
    text = captured.getvalue()
    assert SECRET not in text and "k" * 20 not in text
