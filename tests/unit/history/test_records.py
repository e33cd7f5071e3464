"""Outbox records as the scripts write them (apps-design, "Outbox records"): an event's
application and channels, a replay's application, each absent or empty meaning none."""

from __future__ import annotations

import orjson
import pytest

from webhook_service.history.records import (
    EventLogged,
    MalformedRecord,
    NewDelivery,
    ReplayLogged,
    parse,
)
from webhook_service.store.keys import OutboxField

EV = "msg_01JDZ00000000000000000000"
DLV = "dlv_01JDZ0000000000000000000001"
EP = "ep_01JDZ00000000000000000000"


def _event(**extra: object) -> tuple[str, dict[str, str]]:
    record = {"id": EV, "type": "a.b", "t": 5, "key": "key_1", "dlv": [[DLV, EP, "pending"]]}
    fields: dict[str, str] = {
        OutboxField.EVENT: orjson.dumps({**record, **extra}).decode(),
        OutboxField.BODY: "{}",
    }
    return "7-0", fields


def test_an_event_record_names_its_application_and_channels() -> None:
    parsed = parse(_event(app="app_1", ch=["eu", "invoices"]))
    assert parsed == EventLogged(
        7_000_000, EV, "a.b", 5, "key_1", None, "{}", (NewDelivery(DLV, EP, "pending"),),
        application="app_1", channels=("eu", "invoices"),
    )  # fmt: skip


@pytest.mark.parametrize(
    "extra",
    [
        {},  # neither written: an operational event, channels none
        {"app": ""},
        {"app": "", "ch": {}},  # Lua's cjson writes an empty list as {}
        {"ch": []},
    ],
)
def test_absent_or_empty_is_none(extra: dict[str, object]) -> None:
    parsed = parse(_event(**extra))
    assert isinstance(parsed, EventLogged)
    assert (parsed.application, parsed.channels) == (None, ())


def test_channels_that_are_not_a_list_are_a_bug() -> None:
    with pytest.raises(MalformedRecord, match="7-0"):
        parse(_event(app="app_1", ch="eu"))


@pytest.mark.parametrize(("app", "application"), [("app_1", "app_1"), ("", None), (None, None)])
def test_a_replay_record_names_its_event_s_application(
    app: str | None, application: str | None
) -> None:
    record: dict[str, object] = {"ev": EV, "type": "a.b", "t": 9, "dlv": [[DLV, EP, "pending"]]}
    if app is not None:
        record["app"] = app
    parsed = parse(("9-1", {OutboxField.REPLAY: orjson.dumps(record).decode()}))
    assert parsed == ReplayLogged(
        9_000_001, EV, "a.b", 9, (NewDelivery(DLV, EP, "pending"),), application
    )
