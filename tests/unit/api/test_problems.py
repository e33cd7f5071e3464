"""RFC 9457 problem details: ProblemError bodies, JSON pointers, validation errors, middleware."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
import redis.exceptions
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from pydantic import ValidationError

from webhook_service.api.models import EndpointIn, EventIn
from webhook_service.api.problems import (
    CONTENT_TYPE,
    PROBLEM_TYPE_BASE,
    REDIS_DOWN_RETRY_AFTER,
    ProblemError,
    from_validation,
    pointer,
    problem_middleware,
)


def body_of(response: web.Response) -> dict[str, Any]:
    assert isinstance(response.body, bytes)
    parsed: dict[str, Any] = orjson.loads(response.body)
    return parsed


def validation_problem(model: type[Any], data: Any) -> ProblemError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return from_validation(caught.value)


# -- pointer ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ([], ""),
        (["data"], "/data"),
        (["event_types", 1], "/event_types/1"),
        (["a/b"], "/a~1b"),
        (["m~n"], "/m~0n"),
        # ~ is escaped before /, so a / never turns into ~01.
        (["~/"], "/~0~1"),
        (["~1"], "/~01"),
        (["/"], "/~1"),
        ([""], "/"),
        (["a", "", "b"], "/a//b"),
        (["data", "x y", 0, "é"], "/data/x y/0/é"),
    ],
)
def test_pointer_follows_rfc_6901(location: list[int | str], expected: str) -> None:
    assert pointer(location) == expected


def _resolve(document: Any, ptr: str) -> Any:
    """A minimal RFC 6901 reader, to check pointers round-trip."""
    if ptr == "":
        return document
    for token in ptr[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        document = document[int(token)] if isinstance(document, list) else document[token]
    return document


def test_pointers_resolve_back_to_the_field() -> None:
    document = {"a/b": {"~x": [10, {"~1/": "found"}]}}
    assert _resolve(document, pointer(["a/b", "~x", 1, "~1/"])) == "found"


# -- from_validation --------------------------------------------------------------------------


def test_from_validation_is_a_422_with_one_error_per_field() -> None:
    problem = validation_problem(EventIn, {"type": "bad type", "data": [], "extra": 1})
    assert problem.status == 422
    assert problem.kind == "validation-failed"
    pointers = sorted(e["pointer"] for e in problem.errors)
    assert pointers == ["/data", "/extra", "/type"]
    assert all(e["detail"] for e in problem.errors)


def test_a_non_object_data_points_at_data() -> None:
    problem = validation_problem(EventIn, {"type": "invoice.paid", "data": "text"})
    assert [e["pointer"] for e in problem.errors] == ["/data"]


def test_a_bad_list_item_points_at_its_index() -> None:
    problem = validation_problem(
        EndpointIn, {"url": "https://x.example.com/", "event_types": ["ok", "not ok", "fine"]}
    )
    assert [e["pointer"] for e in problem.errors] == ["/event_types/1"]


def test_a_missing_field_points_at_it() -> None:
    problem = validation_problem(EventIn, {"data": {}})
    assert [e["pointer"] for e in problem.errors] == ["/type"]


def test_a_prefix_is_prepended_and_escaped() -> None:
    with pytest.raises(ValidationError) as caught:
        EventIn.model_validate({"type": "x", "data": 1})
    problem = from_validation(caught.value, prefix=["batch/0"])
    assert [e["pointer"] for e in problem.errors] == ["/batch~10/data"]


def test_the_errors_carry_no_docs_urls() -> None:
    problem = validation_problem(EventIn, {"type": "", "data": {}})
    assert all("errors.pydantic.dev" not in e["detail"] for e in problem.errors)
    assert all(set(e) == {"pointer", "detail"} for e in problem.errors)


# -- ProblemError.response --------------------------------------------------------------------


def test_the_response_is_problem_json_with_every_member() -> None:
    errors = [{"pointer": "/data", "detail": "Input should be a valid dictionary"}]
    response = ProblemError(422, "The request does not match.", errors=errors).response(
        "/v1/events"
    )
    assert response.status == 422
    assert response.content_type == CONTENT_TYPE == "application/problem+json"
    assert body_of(response) == {
        "type": PROBLEM_TYPE_BASE + "validation-failed",
        "title": "Validation failed",
        "status": 422,
        "detail": "The request does not match.",
        "instance": "/v1/events",
        "errors": errors,
    }


def test_errors_are_left_out_when_there_are_none() -> None:
    body = body_of(ProblemError(404, "No endpoint has this id.").response("/v1/endpoints/x"))
    assert "errors" not in body
    assert body["type"] == PROBLEM_TYPE_BASE + "not-found"
    assert body["title"] == "Not found"
    assert body["instance"] == "/v1/endpoints/x"


def test_an_explicit_kind_names_the_type() -> None:
    body = body_of(ProblemError(400, "bad", kind="invalid-json").response("/"))
    assert body["type"] == PROBLEM_TYPE_BASE + "invalid-json"
    assert body["title"] == "Malformed request"


def test_an_unknown_status_gets_a_generic_title_and_kind() -> None:
    problem = ProblemError(418, "teapot")
    assert problem.kind == "error"
    body = body_of(problem.response("/tea"))
    assert body["title"] == "Error"
    assert body["status"] == 418


def test_headers_travel_with_the_response() -> None:
    response = ProblemError(503, "down", headers={"Retry-After": "5"}).response("/")
    assert response.headers["Retry-After"] == "5"
    assert response.headers["Content-Type"].startswith(CONTENT_TYPE)


def test_problem_error_is_an_exception_with_its_detail() -> None:
    problem = ProblemError(409, "busy")
    assert str(problem) == "busy"
    assert problem.errors == []
    assert problem.headers == {}


# -- problem_middleware ------------------------------------------------------------------------


async def _through_middleware(exc: BaseException, path: str = "/v1/things") -> web.StreamResponse:
    async def handler(request: web.Request) -> web.StreamResponse:
        raise exc

    return await problem_middleware(make_mocked_request("POST", path), handler)


async def test_middleware_turns_a_problem_into_its_response() -> None:
    response = await _through_middleware(ProblemError(404, "gone"), "/v1/endpoints/ep_1")
    assert isinstance(response, web.Response)
    assert response.status == 404
    assert body_of(response)["instance"] == "/v1/endpoints/ep_1"


@pytest.mark.parametrize(
    ("path", "instance"),
    [
        ("/v1/events/%C2%95E%C3%9E%3C", "/v1/events/%C2%95E%C3%9E%3C"),
        ("/v1/endpoints/a%20b", "/v1/endpoints/a%20b"),
    ],
)
async def test_the_instance_is_a_uri_reference_whatever_the_path(path: str, instance: str) -> None:
    response = await _through_middleware(ProblemError(404, "gone"), path)
    assert isinstance(response, web.Response)
    assert body_of(response)["instance"] == instance


async def test_middleware_turns_http_errors_into_problems_and_keeps_allow() -> None:
    response = await _through_middleware(web.HTTPMethodNotAllowed("PUT", ["GET", "POST"]))
    assert isinstance(response, web.Response)
    assert response.status == 405
    assert response.content_type == CONTENT_TYPE
    assert set(response.headers["Allow"].split(",")) == {"GET", "POST"}
    assert body_of(response)["title"] == "Method not allowed"


async def test_middleware_lets_redirects_through() -> None:
    with pytest.raises(web.HTTPFound):
        await _through_middleware(web.HTTPFound("/elsewhere"))


@pytest.mark.parametrize(
    "exc",
    [
        redis.exceptions.ConnectionError("refused"),
        redis.exceptions.TimeoutError("slow"),
        redis.exceptions.BusyLoadingError("loading"),
        redis.exceptions.ReadOnlyError("replica"),
        redis.exceptions.ResponseError("NOREPLICAS Not enough good replicas to write."),
        redis.exceptions.ResponseError("MASTERDOWN Link with MASTER is down"),
        redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        redis.exceptions.ResponseError("MISCONF Errors writing to the AOF file"),
        redis.exceptions.ResponseError("BUSY Valkey is busy running a script."),
    ],
)
async def test_middleware_turns_a_refusing_store_into_503(exc: Exception) -> None:
    response = await _through_middleware(exc)
    assert isinstance(response, web.Response)
    assert response.status == 503
    assert response.headers["Retry-After"] == REDIS_DOWN_RETRY_AFTER
    assert body_of(response)["type"] == PROBLEM_TYPE_BASE + "store-unavailable"


async def test_a_refusal_says_nothing_changed_a_lost_connection_that_something_may_have() -> None:
    refused = await _through_middleware(redis.exceptions.ResponseError("MISCONF disk full"))
    lost = await _through_middleware(redis.exceptions.TimeoutError("Timeout reading"))
    assert isinstance(refused, web.Response) and isinstance(lost, web.Response)
    assert "cannot write its data to disk" in body_of(refused)["detail"]
    assert "nothing was changed" in body_of(refused)["detail"]
    assert "same Idempotency-Key" in body_of(lost)["detail"]


@pytest.mark.parametrize(
    "exc",
    [redis.exceptions.ResponseError("WRONGTYPE Operation against a key"), KeyError("bug")],
)
async def test_anything_else_is_a_500_problem_logged_once_with_its_traceback(
    exc: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, "webhook_service.api.problems"):
        response = await _through_middleware(exc)
    assert isinstance(response, web.Response)
    assert response.status == 500
    assert response.content_type == CONTENT_TYPE
    assert body_of(response)["type"] == PROBLEM_TYPE_BASE + "internal-error"
    [logged] = caplog.records
    assert logged.levelno == logging.ERROR
    assert logged.exc_info is not None and logged.exc_info[1] is exc
