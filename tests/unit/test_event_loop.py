"""WEBHOOK_EVENT_LOOP: the loop the API and the workers' delivery threads run on."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
import uvloop

from webhook_service import event_loop
from webhook_service.config import Settings


async def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_uvloop_is_the_default() -> None:
    assert Settings.model_construct().event_loop == "uvloop"


@pytest.mark.parametrize(
    ("name", "kind"), [("uvloop", uvloop.Loop), ("asyncio", asyncio.BaseEventLoop)]
)
def test_the_setting_chooses_the_loop_run_and_the_factory_make(
    name: Literal["uvloop", "asyncio"], kind: type
) -> None:
    settings = Settings.model_construct(event_loop=name)
    ran = event_loop.run(_running_loop(), settings)
    assert isinstance(ran, kind)
    made = event_loop.loop_factory(settings)()
    try:
        assert isinstance(made, kind)
        assert isinstance(made, uvloop.Loop) == (name == "uvloop")
    finally:
        made.close()


def test_any_other_loop_is_refused() -> None:
    with pytest.raises(ValueError, match="event_loop"):
        Settings(event_loop="trio")
