"""The endpoint form's reading (dashboard/endpoint_form.py): what a person types becomes the
API's fields or a refusal beside its field, an endpoint reads back into the form unchanged,
an edit carries only what changed, and the API's problem pointers land on their fields."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from multidict import MultiDict, MultiDictProxy

from webhook_service.client.errors import APIError, ProblemDetails
from webhook_service.dashboard.endpoint_form import (
    DeliverySettings,
    EndpointForm,
    FormInvalid,
    changed,
    field_errors,
    number_text,
)

ENDPOINT: dict[str, Any] = {
    "id": "ep_1", "url": "https://hooks.example/in", "description": "Orders",
    "event_types": ["b.type", "a.type"], "channels": ["eu"], "disabled": False,
    "headers": {"X-Tenant": "acme", "X-Other": "1"}, "rate_limit": 0.25,
    "retry_schedule": [0.0, 5.0, 300.0, 0.125], "timeout_seconds": 12.5,
    "filter": {"data.amount": {"$gte": 100}}, "signature": "hmac", "ordering": "fifo",
}  # fmt: skip


def form(**fields: str | list[str]) -> MultiDictProxy[str]:
    items: list[tuple[str, str]] = []
    for name, value in fields.items():
        items.extend((name, v) for v in (value if isinstance(value, list) else [value]))
    return MultiDictProxy(MultiDict(items))


def test_typed_fields_become_the_apis() -> None:
    typed = form(
        url=" https://hooks.example/in ", event_types=["a.type"], channels="eu, , us",
        rate_limit="10", retry_schedule="0, 5,300", timeout="15",
        filter='{"data.amount": {"$gte": 100}}', headers="X-Tenant: acme\n\nX-Two:  b c ",
        disabled="1", signature="ed25519", ordering="fifo",
    )  # fmt: skip
    assert EndpointForm.read(typed).fields() == {
        "url": "https://hooks.example/in", "description": "", "event_types": ["a.type"],
        "channels": ["eu", "us"],
    }  # fmt: skip
    settings = DeliverySettings.read(typed)
    assert settings.signature == "ed25519"
    assert settings.fields() == {
        "rate_limit": 10.0, "retry_schedule": [0.0, 5.0, 300.0], "timeout_seconds": 15.0,
        "ordering": "fifo", "filter": {"data.amount": {"$gte": 100}},
        "headers": {"X-Tenant": "acme", "X-Two": "b c"}, "disabled": True,
    }  # fmt: skip


def test_empty_fields_are_the_services_defaults() -> None:
    assert DeliverySettings.read(form(signature="rsa", ordering="lifo")).fields() == {
        "rate_limit": None, "retry_schedule": None, "timeout_seconds": None, "ordering": None,
        "filter": None, "headers": None, "disabled": False,
    }  # fmt: skip
    assert DeliverySettings.read(form(signature="rsa")).signature == "hmac"


@pytest.mark.parametrize(
    ("fields", "field", "said"),
    [
        ({"retry_schedule": "0, five"}, "retry_schedule", "separated by commas"),
        ({"retry_schedule": "0, inf"}, "retry_schedule", "separated by commas"),
        ({"rate_limit": "fast"}, "rate_limit", "requests a second"),
        ({"timeout": "nan"}, "timeout", "seconds"),
        ({"filter": "{not json"}, "filter", "not JSON"),
        ({"filter": "[1, 2]"}, "filter", "a JSON object"),
        ({"headers": "X-Tenant acme"}, "headers", "line 1: Name: value"),
        ({"headers": "X-A: 1\nX-A: 2"}, "headers", "line 2: X-A is given twice"),
    ],
)
def test_what_cannot_be_sent_is_refused_beside_its_field(
    fields: dict[str, str], field: str, said: str
) -> None:
    with pytest.raises(FormInvalid) as refused:
        DeliverySettings.read(form(**fields)).fields()
    assert list(refused.value.errors) == [field] and said in refused.value.errors[field]


def test_an_endpoint_reads_back_into_the_form_unchanged() -> None:
    settings = DeliverySettings.of(ENDPOINT)
    assert settings.retry_schedule == "0, 5, 300, 0.125" and settings.rate_limit == "0.25"
    assert settings.headers == "X-Tenant: acme\nX-Other: 1"
    fields = {**EndpointForm.of(ENDPOINT).fields(), **settings.fields()}
    # Saved as it was shown, the form changes nothing.
    assert changed(ENDPOINT, fields) == {}
    assert [number_text(v) for v in (300.0, 0.1, 1e-7, 604800.0)] == [
        "300", "0.1", "1e-07", "604800",
    ]  # fmt: skip


def test_an_edit_carries_only_what_differs() -> None:
    fields = {**EndpointForm.of(ENDPOINT).fields(), **DeliverySettings.of(ENDPOINT).fields()}
    fields["retry_schedule"] = [0.0, 2.0]
    fields["channels"] = None
    fields["ordering"] = None
    fields["event_types"] = ["a.type", "b.type"]  # the same types, in another order
    assert changed(ENDPOINT, fields) == {
        "retry_schedule": [0.0, 2.0], "channels": None, "ordering": None,
    }  # fmt: skip
    # No headers, and none typed: nothing to send; an empty map is none.
    assert changed({"headers": {}}, {"headers": None}) == {}


def test_problem_pointers_land_on_their_fields() -> None:
    body = {
        "type": "https://webhook-service.dev/problems/invalid-filter",
        "detail": "The filter is not valid.",
        "errors": [
            {"pointer": "/filter/data.amount/$bogus", "detail": "no comparison operator"},
            {"pointer": "/timeout_seconds", "detail": "at most 60"},
            {"pointer": "/retry_schedule/2", "detail": "at most 604800"},
            {"pointer": "/retry_schedule/3", "detail": "at most 604800"},
        ],
    }
    error = APIError(ProblemDetails.parse(422, orjson.dumps(body)))
    assert field_errors(error) == {
        "filter": "data.amount/$bogus: no comparison operator",
        "timeout": "at most 60",
        "retry_schedule": "2: at most 604800; 3: at most 604800",
    }
