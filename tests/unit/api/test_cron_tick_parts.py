"""The tick route's pure parts: who may call it, and how a batch's results are counted."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request
from pydantic import SecretStr

from webhook_service.api.cron import TickSummary, _check_bearer
from webhook_service.api.problems import ProblemError
from webhook_service.delivery.engine import Result

SECRET = SecretStr("s3cret-tick")


@pytest.mark.parametrize(
    "header", ["Bearer s3cret-tick", "bearer s3cret-tick", "Bearer  s3cret-tick "]
)
def test_the_secret_as_a_bearer_token_passes(header: str) -> None:
    _check_bearer(
        make_mocked_request("POST", "/v1/cron/tick", headers={"Authorization": header}), SECRET
    )


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer s3cret-tic"},
        {"Authorization": "Bearer s3cret-tickk"},
        {"Authorization": "Basic s3cret-tick"},
        {"Authorization": "s3cret-tick"},
        {"Authorization": "Bearer sécret"},
    ],
)
def test_anything_else_is_401(headers: dict[str, str]) -> None:
    request = make_mocked_request("POST", "/v1/cron/tick", headers=headers)
    with pytest.raises(ProblemError) as raised:
        _check_bearer(request, SECRET)
    assert raised.value.status == 401
    assert raised.value.headers["WWW-Authenticate"].startswith("Bearer")


def test_the_summary_counts_what_happened_and_ignores_what_was_not_ours() -> None:
    statuses = [
        "succeeded", "succeeded",  # delivered
        "failed", "disabled",  # ended undelivered
        "pending", "busy", "throttled",  # to be tried again
        "done", "leased", "early", "gone", "stale",  # not this tick's to count
    ]  # fmt: skip
    summary = TickSummary.of([Result(f"dlv_{n}", s) for n, s in enumerate(statuses)], 7)
    assert summary == TickSummary(delivered=2, failed=2, rescheduled=3, remaining=7)
