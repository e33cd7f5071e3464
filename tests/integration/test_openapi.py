"""The OpenAPI contract: openapi.yaml is valid, names exactly the routes the app serves, and
every answer the running API gives (status, content type, headers, body) is declared in it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from openapi_core import Config, OpenAPI
from openapi_core.exceptions import OpenAPIError
from openapi_core.testing import MockRequest, MockResponse
from openapi_spec_validator import validate as validate_spec
from openapi_spec_validator.readers import read_from_filename
from pydantic import SecretStr

from tests.integration.conftest import Api, serve_api, settings_for, wait_for
from tests.support.api_app import api_app
from tests.support.log_away import unreachable_log_url
from tests.support.logged import wait_logged
from tests.support.receiver import Receiver
from tests.support.stack import ADMIN_KEY, Stack
from webhook_service.api.context import SERVICES

SPEC_FILE = Path(__file__).resolve().parents[2] / "openapi.yaml"
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
PROBLEMS = "https://webhook-service.dev/problems/"
PROBLEM_JSON = "application/problem+json"
MAX_BODY = 256 * 1024  # WEBHOOK_MAX_PAYLOAD_BYTES in the test stack (the default)
Reply = tuple[int, Any, dict[str, str]]


@pytest.fixture(scope="module")
def spec_doc() -> dict[str, Any]:
    return dict(read_from_filename(str(SPEC_FILE))[0])


@pytest.fixture(scope="module")
def contract(spec_doc: dict[str, Any]) -> OpenAPI:
    # openapi-core parses only application/json bodies as JSON unless told otherwise.
    problem_json: dict[str, Callable[[bytes], Any]] = {
        PROBLEM_JSON: lambda raw, **_: json.loads(raw)
    }
    return OpenAPI.from_dict(spec_doc, config=Config(extra_media_type_deserializers=problem_json))


async def spec_call(
    api: Api, contract: OpenAPI, method: str, path: str, *, json_body: Any = None,
    data: bytes | None = None, headers: dict[str, str] | None = None, key: str | None = ADMIN_KEY,
) -> Reply:  # fmt: skip
    """Call the API; fail unless the answer is declared for this operation in the spec.

    A 2xx also proves the spec accepts the request the server accepted."""
    sent = {"Authorization": f"Bearer {key}"} if key else {}
    sent.update(headers or {})
    if json_body is not None:
        data = json.dumps(json_body).encode()
        sent.setdefault("Content-Type", "application/json")
    async with api.session.request(method, api.base + path, data=data, headers=sent) as resp:
        raw = await resp.read()
        status, got = resp.status, dict(resp.headers)
    url = urlsplit(path)
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    request = MockRequest(api.base, method, url.path, args=query, headers=sent, data=data,
                          content_type=sent.get("Content-Type", ""))  # fmt: skip
    response = MockResponse(raw, status, got, got.get("Content-Type", ""))
    where = f"{method} {path} -> {status} {got.get('Content-Type')}: {raw[:300]!r}"
    try:
        contract.validate_response(request, response)
        if 200 <= status < 300:
            contract.validate_request(request)
    except OpenAPIError as exc:
        pytest.fail(f"not in the contract: {where}\n{exc!r}: {exc.__cause__}")
    if "Content-Type" not in got:
        assert raw == b"", where
    if not raw:
        return status, None, got
    # JSON and problem+json are parsed; text (the Prometheus metrics) is handed back as is.
    return status, json.loads(raw) if "json" in got["Content-Type"] else raw.decode(), got


class WebhookCall(MockRequest):
    """A request a subscriber received; its `name` makes openapi-core look under `webhooks:`."""

    name = "webhook"


def arrived(receiver: Receiver, name: str, count: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(receiver.for_endpoint(name)) >= count

    return check


def test_spec_is_valid_openapi_3_1(spec_doc: dict[str, Any]) -> None:
    assert spec_doc["openapi"].startswith("3.1.")
    validate_spec(spec_doc)
    bearer = spec_doc["components"]["securitySchemes"]["bearerAuth"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    for name in ("Endpoint", "EndpointCreated", "Delivery", "DeliveryDetail", "Attempt", "Event"):
        assert name in spec_doc["components"]["schemas"]
    assert {"limit", "cursor"} <= set(spec_doc["components"]["parameters"])


async def test_every_route_is_documented_and_nothing_else(
    stack: Stack, spec_doc: dict[str, Any]
) -> None:
    app = await api_app(settings_for(stack))
    # The dashboard's and the portal's HTML pages (/dashboard…, /portal…) are not API
    # operations: they are clients of this API, documented in the README, and answer HTML
    # and redirects, not JSON.
    routes = [
        (r.method, r.resource.canonical)
        for r in app.router.routes()
        if r.resource and not r.resource.canonical.startswith(("/dashboard", "/portal"))
    ]
    served = {(m, p) for m, p in routes if m != "HEAD"}
    # aiohttp adds HEAD beside every GET on its own; it is not part of the contract.
    assert {p for m, p in routes if m == "HEAD"} <= {p for m, p in served if m == "GET"}
    paths = spec_doc["paths"]
    documented = {(m.upper(), p) for p, item in paths.items() for m in item if m in HTTP_METHODS}
    assert served == documented
    for method, path in documented:
        operation = paths[path][method.lower()]
        public = operation.get("security") == []
        assert public == (path in ("/healthz", "/readyz")), (method, path)
        assert public or {"401", "503"} <= set(operation["responses"]), (method, path)


def test_the_checker_rejects_what_the_spec_does_not_declare(contract: OpenAPI) -> None:
    request = MockRequest("http://api", "get", "/v1/endpoints/ep_x")
    problem = {"type": PROBLEMS + "not-found", "title": "Not found", "status": 404,
               "detail": "No endpoint has this id.", "instance": "/v1/endpoints/ep_x"}  # fmt: skip
    unauthorized = {**problem, "type": PROBLEMS + "unauthorized", "title": "Unauthorized"}
    declared = MockResponse(json.dumps(problem).encode(), 404, {}, PROBLEM_JSON)
    contract.validate_response(request, declared)  # the control: this one is in the spec
    undeclared = [
        (b"500 Internal Server Error", 500, "text/plain"),
        (json.dumps({**problem, "status": 418}).encode(), 418, PROBLEM_JSON),
        (json.dumps(problem).encode(), 404, "application/json"),
        (json.dumps({**problem, "status": 400}).encode(), 404, PROBLEM_JSON),
        (json.dumps({**problem, "extra": 1}).encode(), 404, PROBLEM_JSON),
        (json.dumps({**unauthorized, "status": 401}).encode(), 401, PROBLEM_JSON),  # no header
        (b'{"id": "ep_x"}', 200, "application/json"),
    ]
    for raw, status, content_type in undeclared:
        with pytest.raises(OpenAPIError):
            contract.validate_response(request, MockResponse(raw, status, {}, content_type))


async def test_a_working_session_matches_the_contract(
    api: Api, receiver: Receiver, contract: OpenAPI, stack: Stack
) -> None:
    async def call(method: str, path: str, **kwargs: Any) -> Reply:
        return await spec_call(api, contract, method, path, **kwargs)

    async def endpoint(name: str, **fields: Any) -> dict[str, Any]:
        body = {"url": receiver.url(name), **fields}
        status, reply, _ = await call("POST", "/v1/endpoints", json_body=body)
        assert status == 201, reply
        created: dict[str, Any] = reply
        api.created_endpoints.append(created["id"])
        receiver.secrets[name] = [created["secret"]]
        return created

    # A receiver that holds the request keeps its delivery pending for seconds: start it first.
    receiver.hang.add("slow")
    slow = await endpoint("slow", event_types=["contract.slow"])
    slow_event = {"type": "contract.slow", "data": {}}
    status, slow_accepted, _ = await call("POST", "/v1/events", json_body=slow_event)
    assert (status, slow_accepted["deliveries"]) == (202, 1)

    good = await endpoint("good", event_types=["contract.made", "contract.made", "contract.b"])
    assert good["event_types"] == ["contract.b", "contract.made"]
    receiver.behaviours["bad"] = lambda _name, _n: 500
    bad = await endpoint("bad", event_types=None, description="fails", disabled=False)
    ed = await endpoint("ed", event_types=["contract.none"], signature="ed25519")
    assert (ed["secret"], ed["public_key"][:5]) == (None, "whpk_")

    status, page, _ = await call("GET", "/v1/endpoints?limit=1")
    assert status == 200 and len(page["data"]) == 1 and page["next_cursor"]
    status, page, _ = await call("GET", f"/v1/endpoints?limit=250&cursor={page['next_cursor']}")
    assert status == 200 and page["next_cursor"] is None
    assert (await call("GET", f"/v1/endpoints/{good['id']}"))[1]["url"] == good["url"]
    patch = {"description": "orders", "url": None}
    status, changed, _ = await call("PATCH", f"/v1/endpoints/{good['id']}", json_body=patch)
    assert (status, changed["description"], changed["url"]) == (200, "orders", good["url"])
    status, secret, _ = await call("GET", f"/v1/endpoints/{good['id']}/secret")
    assert (status, secret) == (200, {"secret": good["secret"], "public_key": None})
    status, ed_key, _ = await call("POST", f"/v1/endpoints/{ed['id']}/rotate-secret")
    assert (status, len(ed_key["previous_keys"]), ed_key["secret"]) == (200, 1, None)
    status, shown, _ = await call("GET", f"/v1/endpoints/{ed['id']}/secret")
    assert shown == {"secret": None, "public_key": ed_key["public_key"]} != ed["public_key"]

    event = {"type": "contract.made", "data": {"order": 1, "items": ["a", "b"]}}
    idem = {"Idempotency-Key": "order-1 created"}
    status, accepted, headers = await call("POST", "/v1/events", json_body=event, headers=idem)
    assert (status, accepted["deliveries"]) == (202, 2)
    assert "Idempotent-Replayed" not in headers
    same_json = b'{ "data": {"items": ["a", "b"], "order": 1}, "type": "contract.made" }'
    utf8 = {**idem, "Content-Type": "application/json; charset=utf-8"}
    status, replay, headers = await call("POST", "/v1/events", data=same_json, headers=utf8)
    assert (status, replay, headers["Idempotent-Replayed"]) == (202, accepted, "true")
    other = {**event, "data": {"order": 2}}
    status, problem, _ = await call("POST", "/v1/events", json_body=other, headers=idem)
    assert (status, problem["type"]) == (422, PROBLEMS + "idempotency-key-reused")

    async def settled() -> bool:
        _, body, _ = await call("GET", f"/v1/events/{accepted['id']}")
        return {d["status"] for d in body["deliveries"]} == {"succeeded", "failed"}

    await wait_for(settled, timeout=15)
    await wait_logged(stack.valkey.url)  # the lists and attempt logs are the SQL log's
    status, body, _ = await call("GET", f"/v1/events/{accepted['id']}")
    assert body["data"] == event["data"] and len(body["deliveries"]) == 2
    by_endpoint = {d["endpoint_id"]: d["id"] for d in body["deliveries"]}
    for query in [
        f"event_id={accepted['id']}",
        f"endpoint_id={good['id']}&status=succeeded&limit=5",
        f"event_type=contract.made&since={accepted['timestamp']}&until=2999-01-01T00:00:00Z",
        "status=failed&limit=1",
        "",
    ]:
        status, page, _ = await call("GET", f"/v1/deliveries?{query}")
        assert status == 200 and page["data"], query
    status, failed, _ = await call("GET", f"/v1/deliveries/{by_endpoint[bad['id']]}")
    assert [a["status_code"] for a in failed["attempt_log"]] == [500] * 4
    assert failed["attempt_log"][0]["response_body"] == "answer 500"

    # After a rotation the retried webhook carries two signatures; both requests the
    # subscriber got must be the one the spec describes under `webhooks:`.
    rotate = {"grace_period_seconds": 60, "secret": None}
    status, rotated, _ = await call(
        "POST", f"/v1/endpoints/{good['id']}/rotate-secret", json_body=rotate
    )
    assert (status, len(rotated["previous_keys"])) == (200, 1) and rotated["secret"]
    status, retried, _ = await call("POST", f"/v1/deliveries/{by_endpoint[good['id']]}/retry")
    assert (status, retried["status"]) == (202, "pending")
    await wait_for(arrived(receiver, "good", 2))
    for hook in receiver.for_endpoint("good"):
        assert hook.verified and hook.webhook_id == accepted["id"]
        sent = WebhookCall("http://subscriber", "post", "/", headers=hook.headers, data=hook.body)
        contract.validate_request(sent)
    assert len(hook.headers["webhook-signature"].split()) == 2

    await wait_for(arrived(receiver, "slow", 1))
    status, body, _ = await call("GET", f"/v1/events/{slow_accepted['id']}")
    (slow_delivery,) = body["deliveries"]
    status, problem, _ = await call("POST", f"/v1/deliveries/{slow_delivery['id']}/retry")
    assert (status, problem["type"]) == (409, PROBLEMS + "conflict")

    assert (await call("DELETE", f"/v1/endpoints/{slow['id']}"))[:2] == (204, None)
    assert (await call("DELETE", f"/v1/endpoints/{slow['id']}"))[0] == 404
    assert (await call("GET", "/healthz", key=None))[:2] == (200, {"status": "ok"})


# Every route that takes an id, called with ids nothing has.
UNKNOWN_IDS: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/v1/endpoints/ep_no", {}), ("PATCH", "/v1/endpoints/ep_no", {"json_body": {}}),
    ("DELETE", "/v1/endpoints/ep_no", {}), ("GET", "/v1/endpoints/ep_no/secret", {}),
    ("POST", "/v1/endpoints/ep_no/rotate-secret", {}), ("GET", "/v1/events/msg_no", {}),
    ("GET", "/v1/deliveries/dlv_no", {}), ("POST", "/v1/deliveries/dlv_no/retry", {}),
]  # fmt: skip


async def test_every_error_class_matches_the_contract(api: Api, contract: OpenAPI) -> None:
    created = {"url": "http://127.0.0.1:9/x"}
    status, endpoint, _ = await spec_call(api, contract, "POST", "/v1/endpoints", json_body=created)
    assert status == 201
    api.created_endpoints.append(endpoint["id"])
    ev, eps, ep = "/v1/events", "/v1/endpoints", f"/v1/endpoints/{endpoint['id']}"
    rot, dlv = f"{ep}/rotate-secret", "/v1/deliveries"
    event = {"type": "contract.err", "data": {}}
    js = {"headers": {"Content-Type": "application/json"}}
    text = {"headers": {"Content-Type": "text/plain"}}
    huge = "x" * MAX_BODY
    expected: dict[tuple[int, str], list[tuple[str, str, dict[str, Any]]]] = {
        (401, "unauthorized"): [
            ("GET", eps, {"key": None}), ("POST", ev, {"key": "wrong", "json_body": event}),
            ("GET", dlv, {"headers": {"Authorization": "Basic eDp5"}}),
            ("GET", f"{ep}/secret", {"key": "wrong"}),
        ],
        (400, "malformed-request"): [
            ("POST", ev, {"data": b"{nope", **js}), ("POST", eps, {"data": b"", **js}),
            ("PATCH", ep, {"data": b"[1,", **js}), ("POST", rot, {"data": b"{", **js}),
        ],
        (400, "invalid-idempotency-key"): [
            ("POST", ev, {"json_body": event, "headers": {"Idempotency-Key": "k" * 256}}),
        ],
        (404, "not-found"): UNKNOWN_IDS,
        (413, "payload-too-large"): [
            ("POST", ev, {"json_body": {**event, "data": {"blob": huge}}}),
            ("POST", eps, {"json_body": {"url": huge}}),
            ("PATCH", ep, {"json_body": {"description": huge}}),
            ("POST", rot, {"json_body": {"secret": huge}}),
        ],
        (415, "unsupported-media-type"): [
            ("POST", ev, {"data": b"{}", **text}), ("POST", eps, {"data": b"{}"}),
            ("PATCH", ep, {"data": b"{}", **text}), ("POST", rot, {"data": b"{}", **text}),
        ],
        (422, "validation-failed"): [
            ("POST", ev, {"json_body": {"type": "a..b", "data": {}}}),
            ("POST", ev, {"json_body": {**event, "extra": 1}}),
            ("POST", ev, {"json_body": [event]}),
            ("POST", eps, {"json_body": {"url": "https://x", "event_types": ["a b"]}}),
            ("PATCH", ep, {"json_body": {"event_types": []}}),
            ("PATCH", ep, {"json_body": {"secret": "whsec_x"}}),
            ("POST", rot, {"json_body": {"secret": "whsk_AAAA"}}),
            ("POST", rot, {"json_body": {"grace_period_seconds": -1}}),
            ("GET", f"{eps}?limit=0", {}), ("GET", f"{eps}?cursor={'c' * 129}", {}),
            ("GET", f"{dlv}?limit=many", {}), ("GET", f"{dlv}?status=lost", {}),
            ("GET", f"{dlv}?since=yesterday", {}),
        ],
        (422, "destination-blocked"): [
            ("POST", eps, {"json_body": {"url": "http://10.0.0.1/"}}),
            ("PATCH", ep, {"json_body": {"url": "ftp://127.0.0.1/"}}),
        ],
    }  # fmt: skip
    for (code, kind), cases in expected.items():
        for method, path, kwargs in cases:
            status, problem, headers = await spec_call(api, contract, method, path, **kwargs)
            assert (status, problem["type"]) == (code, PROBLEMS + kind), (method, path, problem)
            assert problem["instance"] == urlsplit(path).path
            assert headers["Content-Type"] == PROBLEM_JSON
            assert code != 401 or headers["WWW-Authenticate"] == "Bearer"
            assert kind != "validation-failed" or problem["errors"], problem


async def test_an_unreachable_store_is_a_503_everywhere(stack: Stack, contract: OpenAPI) -> None:
    app = await api_app(settings_for(stack))
    # Every store shares this client, which has not connected yet: send it where nobody listens.
    app[SERVICES].redis.connection_pool.connection_kwargs.update(host="127.0.0.1", port=1)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/v1/events", {"json_body": {"type": "contract.down", "data": {}}}),
        ("POST", "/v1/endpoints", {"json_body": {"url": "http://127.0.0.1:9/"}}),
        ("GET", "/v1/endpoints", {}), *UNKNOWN_IDS,
    ]  # fmt: skip
    try:
        async with aiohttp.ClientSession() as session:
            down = Api(session, str(server.make_url("")).rstrip("/"))
            for method, path, kwargs in calls:
                status, problem, headers = await spec_call(down, contract, method, path, **kwargs)
                assert (status, headers["Retry-After"]) == (503, "5"), (method, path)
                assert problem["type"] == PROBLEMS + "store-unavailable"
            # A list is the log's: still served, each pending row as the log has it.
            status, page, _ = await spec_call(down, contract, "GET", "/v1/deliveries")
            assert status == 200 and "data" in page
    finally:
        await server.close()


async def test_an_unreadable_log_is_a_503_on_the_history_routes(
    stack: Stack, contract: OpenAPI
) -> None:
    settings = settings_for(stack).model_copy(update={"log_url": SecretStr(unreachable_log_url())})
    async with serve_api(settings) as (_, away):
        for path in (
            "/v1/deliveries?status=failed",
            "/v1/events",
            "/v1/deliveries/dlv_" + "0" * 52,
        ):
            status, problem, headers = await spec_call(away, contract, "GET", path)
            assert (status, headers["Retry-After"]) == (503, "5"), path
            assert problem["type"] == PROBLEMS + "log-unavailable"


async def test_a_non_ascii_digit_limit_is_a_422(api: Api, contract: OpenAPI) -> None:
    status, _, _ = await spec_call(api, contract, "GET", "/v1/endpoints?limit=%C2%B2")
    assert status == 422


async def test_history_stats_health_and_metrics_match_the_contract(
    api: Api, receiver: Receiver, contract: OpenAPI
) -> None:
    async def call(method: str, path: str, **kwargs: Any) -> Reply:
        return await spec_call(api, contract, method, path, **kwargs)

    receiver.behaviours["hist"] = lambda _name, n: 503 if n == 1 else 200
    body = {"url": receiver.url("hist"), "event_types": ["contract.hist"]}
    status, endpoint, _ = await call("POST", "/v1/endpoints", json_body=body)
    assert status == 201
    api.created_endpoints.append(endpoint["id"])
    receiver.secrets["hist"] = [endpoint["secret"]]
    event = {"type": "contract.hist", "data": {"n": 1}}
    status, accepted, _ = await call("POST", "/v1/events", json_body=event)
    assert status == 202
    await wait_for(arrived(receiver, "hist", 2))

    for query in [
        "",
        "type=contract.hist&limit=1",
        f"since={accepted['timestamp']}&until=2999-01-01",
    ]:
        status, page, _ = await call("GET", f"/v1/events?{query}")
        assert status == 200 and page["data"], query
    assert (await call("GET", "/v1/events?until=later"))[0] == 422
    ep = endpoint["id"]
    for query in [f"endpoint_id={ep}&status_class=2xx&attempts_min=2", "attempts_max=0"]:
        assert (await call("GET", f"/v1/deliveries?{query}"))[0] == 200
    assert (await call("GET", "/v1/deliveries?status_class=6xx"))[0] == 422

    async def succeeded() -> bool:
        _, stats, _ = await call("GET", f"/v1/endpoints/{ep}/stats")
        return bool(stats["last_hour"]["succeeded"])

    await wait_for(succeeded)
    status, stats, _ = await call("GET", f"/v1/endpoints/{ep}/stats")
    assert status == 200 and stats["last_failure"]["status_code"] == 503
    assert (await call("GET", "/v1/endpoints/ep_no/stats"))[0] == 404

    replay = f"/v1/events/{accepted['id']}/replay"
    assert (await call("POST", replay))[0] == 202
    assert (await call("POST", replay, json_body={"endpoint_id": ep}))[0] == 202
    assert (await call("POST", replay, json_body={"endpoint_id": "ep_no"}))[0] == 422
    assert (await call("POST", "/v1/events/msg_no/replay"))[0] == 404
    assert (await call("DELETE", f"/v1/events/{accepted['id']}/payload"))[0] == 204
    assert (await call("DELETE", "/v1/events/msg_no/payload"))[0] == 404
    assert (await call("POST", replay))[0] == 409

    assert (await call("GET", "/readyz", key=None))[0] in (200, 503)
    status, text, _ = await call("GET", "/metrics")
    assert status == 200 and "webhook_events_accepted_total" in text
    assert (await call("GET", "/metrics", key=None))[0] == 401
