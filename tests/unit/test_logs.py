"""Log lines: JSON or console, the ids from `extra`, and never a secret."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest
import redis.exceptions
from aiohttp import web
from aiohttp.http_exceptions import (
    BadHttpMessage,
    ContentEncodingError,
    HttpProcessingError,
    LineTooLong,
)

from webhook_service import logs
from webhook_service.config import Settings
from webhook_service.store.refusals import REFUSALS, Refusal

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root, server = logging.getLogger(), logging.getLogger("aiohttp.server")
    saved = (root.handlers[:], root.level, logging.getLogRecordFactory(), server.filters[:])
    stream = io.StringIO()
    yield stream
    root.handlers, level, factory, server.filters = saved
    root.setLevel(level)
    logging.setLogRecordFactory(factory)


def _setup(stream: io.StringIO, fmt: str) -> None:
    logs.setup(Settings(log_format=fmt, admin_key="whadm_" + "k" * 32), "worker")
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


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server_log() -> Iterator[tuple[logging.Logger, Clock]]:
    """A logger standing in for aiohttp's server logger, with the filter on a fake clock."""
    clock = Clock()
    log = logging.getLogger("test.aiohttp.server")
    log.filters = [logs.ClientErrorFilter(clock=clock)]
    yield log, clock
    log.filters = []


def _refuse(log: logging.Logger, exc: BaseException) -> None:
    # As aiohttp's RequestHandler.handle_error logs a request it could not parse.
    log.exception("Error handling request from %s", "127.0.0.1", exc_info=exc)


def test_a_clients_broken_http_is_one_info_line_per_kind_a_minute(
    server_log: tuple[logging.Logger, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    log, clock = server_log
    quoted = "Invalid header value char:\n\n  b'Authorization: Bearer leaked-key-text'"
    with caplog.at_level(logging.DEBUG):
        for _ in range(100):
            _refuse(log, BadHttpMessage(quoted))
        _refuse(log, LineTooLong("header", "8190", "9000"))
        clock.now += 59
        _refuse(log, BadHttpMessage(quoted))
        clock.now += 1
        _refuse(log, BadHttpMessage(quoted))
    lines = caplog.records
    assert [r.levelname for r in lines] == ["INFO"] * 3
    assert {r.name for r in lines} == {"webhook_service.api.client_errors"}
    assert not [r for r in lines if r.exc_info or r.exc_text]
    first, other_kind, a_minute_on = (r.getMessage() for r in lines)
    assert "client error 400 BadHttpMessage" in first and "more" not in first
    assert "from 127.0.0.1" in first
    assert "client error 400 LineTooLong" in other_kind
    assert "100 more of this kind" in a_minute_on  # 99 in the first minute, 1 at 59 s
    assert "leaked-key-text" not in caplog.text


def test_a_body_that_cannot_be_decoded_is_the_clients_error_too(
    server_log: tuple[logging.Logger, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    log, _ = server_log
    wrapped = web.RequestPayloadError("400, message: Can not decode content-encoding: gzip")
    wrapped.__cause__ = ContentEncodingError("Can not decode content-encoding: gzip")
    with caplog.at_level(logging.DEBUG):
        # After the answer, aiohttp reads what is left of the body, and fails again.
        log.exception("Unhandled exception", exc_info=wrapped)
    (line,) = caplog.records
    assert line.levelname == "INFO" and "client error 400 ContentEncodingError" in line.message


@pytest.mark.parametrize(
    "exc", [RuntimeError("a bug of ours"), HttpProcessingError(code=500, message="ours")]
)
def test_our_own_errors_stay_errors_with_their_traceback(
    server_log: tuple[logging.Logger, Clock], caplog: pytest.LogCaptureFixture, exc: Exception
) -> None:
    log, _ = server_log
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            log.exception("Error handling request from %s", "127.0.0.1", exc_info=exc)
    assert [(r.levelname, r.exc_info is not None) for r in caplog.records] == [("ERROR", True)] * 3


def test_setup_puts_one_filter_on_aiohttps_server_logger(captured: io.StringIO) -> None:
    _setup(captured, "console")
    _setup(captured, "json")
    server = logging.getLogger("aiohttp.server")
    assert len([f for f in server.filters if isinstance(f, logs.ClientErrorFilter)]) == 1


def test_a_librarys_traceback_of_a_refusal_becomes_our_count(captured: io.StringIO) -> None:
    """kombu logs each refused binding refresh at WARNING with its traceback (every second
    on a full server): through our handler it is a count and our own line at most."""
    _setup(captured, "console")
    before = REFUSALS.counts().get(Refusal.OUT_OF_MEMORY, 0)
    refused = redis.exceptions.OutOfMemoryError(
        "command not allowed when used memory > 'maxmemory'."
    )
    kombu = logging.getLogger("kombu.transport.redis")
    for _ in range(3):
        kombu.warning("maybe_refresh_binding_expiry: Redis error, will retry", exc_info=refused)
    logging.getLogger("webhook_service.test").warning("unrelated", exc_info=RuntimeError("bug"))
    assert REFUSALS.counts()[Refusal.OUT_OF_MEMORY] == before + 3
    text = captured.getvalue()
    assert "RuntimeError: bug" in text  # the unrelated one, whole
    assert "OutOfMemoryError" not in text
