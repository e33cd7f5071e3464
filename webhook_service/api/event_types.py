"""The event-type catalog: what producers send and subscribers pick from, each type with a
description, an optional JSON Schema (2020-12) for its ``data``, examples and a group.
Create, list, read, change, archive (DELETE keeps it, hidden: a name is never reused for
something else), and import from an OpenAPI 3.1 document's ``webhooks``.

Global, not per application: a key bound to an application reads it but never writes it
(403 ``bound-key``, as for creating applications). Ingest checks events against it
(api/validation.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Annotated, Any

import orjson
import yaml
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from webhook_service.api import validation
from webhook_service.api.body import ShapeLimits, check_shape, read_body, read_json, validate
from webhook_service.api.context import Services, services
from webhook_service.api.models import Description, EventType
from webhook_service.api.pagination import page_params, query_problem
from webhook_service.api.problems import ProblemError, pointer
from webhook_service.api.tenancy import bound_application
from webhook_service.catalog_import import read_webhooks
from webhook_service.event_schemas import (
    CompiledSchema,
    SchemaProblem,
    compile_schema,
    example_violations,
)
from webhook_service.store.event_types import (
    MAX_EVENT_TYPES,
    EventTypeRecord,
    EventTypeStore,
    WriteOutcome,
)
from webhook_service.timeutil import iso, now_ms

routes = web.RouteTableDef()

CATALOG = web.AppKey("event_types", EventTypeStore)
MAX_EXAMPLES = 20
# What an OpenAPI document may come as, besides application/json.
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})

Group = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")
]
Examples = Annotated[list[dict[str, Any]], Field(max_length=MAX_EXAMPLES)]


class _Strict(BaseModel):
    # As api/models.py's: "no" is not a boolean. (``schema`` is a BaseModel method's name:
    # the field is json_schema, read as "schema".)
    model_config = ConfigDict(extra="forbid", strict=True)


class EventTypeIn(_Strict):
    name: EventType
    description: Description = ""
    json_schema: dict[str, Any] | None = Field(None, alias="schema")
    examples: Examples = Field(default_factory=list)
    group: Group | None = None
    deprecated: bool = False


class EventTypePatch(_Strict):
    description: Description | None = None
    json_schema: dict[str, Any] | None = Field(None, alias="schema")  # null: no schema
    examples: Examples | None = None
    group: Group | None = None  # null: no group
    deprecated: bool | None = None
    archived: bool | None = None  # false restores an archived type


def event_type_json(record: EventTypeRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "description": record.description,
        "schema": record.schema,
        "examples": list(record.examples),
        "group": record.group,
        "deprecated": record.deprecated,
        "archived": record.archived,
        "created_at": iso(record.created_ms),
        "updated_at": iso(record.updated_ms),
    }


def setup(app: web.Application, svc: Services) -> None:
    store = EventTypeStore(svc.redis)
    app[CATALOG] = store
    validation.setup(app, store)


def _catalog(request: web.Request) -> EventTypeStore:
    return request.app[CATALOG]


def _operator_only(request: web.Request) -> None:
    if bound_application(request) is not None:
        raise ProblemError(
            403,
            "A key bound to an application cannot change the event-type catalog, which every "
            "application shares.",
            kind="bound-key",
        )


def definition_errors(
    schema: dict[str, Any] | None, examples: Sequence[Any]
) -> list[dict[str, str]]:
    """What is wrong with a type's schema and examples, as errors pointing into a body with
    them at ``/schema`` and ``/examples``."""
    compiled: CompiledSchema | None = None
    if schema is not None:
        try:
            compiled = compile_schema(schema)
        except SchemaProblem as exc:
            return [{"pointer": "/schema", "detail": f"not a valid JSON Schema 2020-12: {exc}"}]
    return [
        {"pointer": f"/examples/{index}{v.pointer}", "detail": v.message}
        for index, v in example_violations(compiled, examples)
    ]


def _check_definition(schema: dict[str, Any] | None, examples: Sequence[Any]) -> None:
    errors = definition_errors(schema, examples)
    if errors:
        raise ProblemError(
            422, "The schema, or an example against it, is not valid.", errors=errors
        )


def _full() -> ProblemError:
    return ProblemError(
        422,
        f"The catalog holds {MAX_EVENT_TYPES} event types, as many as it may.",
        kind="catalog-full",
    )


def _missing() -> ProblemError:
    return ProblemError(404, "No event type has this name.")


def record_of(fields: EventTypeIn, now: int, before: EventTypeRecord | None) -> EventTypeRecord:
    """The record a create makes (``before`` None), or an import makes of ``before``."""
    return EventTypeRecord(
        name=fields.name,
        description=fields.description,
        schema=fields.json_schema,
        examples=tuple(fields.examples),
        group=fields.group,
        deprecated=fields.deprecated,
        # An operator's archiving is not undone by importing the document again.
        archived=before.archived if before is not None else False,
        created_ms=before.created_ms if before is not None else now,
        updated_ms=now,
    )


@routes.post("/v1/event-types")
async def create_event_type(request: web.Request) -> web.Response:
    _operator_only(request)
    parsed, _ = await read_json(request, services(request).settings.max_payload_bytes)
    body = validate(EventTypeIn, parsed)
    _check_definition(body.json_schema, body.examples)
    made = record_of(body, now_ms(), None)
    written = await _catalog(request).write(
        body.name, lambda before: made if before is None else WriteOutcome.EXISTS
    )
    if written.outcome is WriteOutcome.EXISTS:
        archived = written.record is not None and written.record.archived
        raise ProblemError(
            409,
            f"The catalog has an event type {body.name}"
            + (' (archived: restore it with PATCH {"archived": false}).' if archived else "."),
            kind="event-type-exists",
            errors=[{"pointer": "/name", "detail": "taken"}],
        )
    if written.outcome is WriteOutcome.FULL:
        raise _full()
    return web.json_response(event_type_json(made), status=201)


def _flag(request: web.Request, name: str) -> bool:
    raw = request.query.get(name, "false")
    if raw not in ("true", "false"):
        raise query_problem(name, "true or false")
    return raw == "true"


@routes.get("/v1/event-types")
async def list_event_types(request: web.Request) -> web.Response:
    limit, cursor = page_params(request)
    include_archived = _flag(request, "include_archived")
    group = request.query.get("group")
    records, next_cursor = await _catalog(request).page(
        limit, cursor, include_archived=include_archived, group=group
    )
    return web.json_response(
        {"data": [event_type_json(r) for r in records], "next_cursor": next_cursor}
    )


@routes.get("/v1/event-types/{name}")
async def get_event_type(request: web.Request) -> web.Response:
    record = await _catalog(request).get(request.match_info["name"])
    if record is None:
        raise _missing()
    return web.json_response(event_type_json(record))


def _patched(record: EventTypeRecord, patch: EventTypePatch) -> EventTypeRecord:
    given = patch.model_fields_set
    schema = patch.json_schema if "json_schema" in given else record.schema
    examples = tuple(patch.examples) if patch.examples is not None else record.examples
    if "json_schema" in given or "examples" in given:
        _check_definition(schema, examples)
    return EventTypeRecord(
        name=record.name,
        description=record.description if patch.description is None else patch.description,
        schema=schema,
        examples=examples,
        group=patch.group if "group" in given else record.group,
        deprecated=record.deprecated if patch.deprecated is None else patch.deprecated,
        archived=record.archived if patch.archived is None else patch.archived,
        created_ms=record.created_ms,
        updated_ms=now_ms(),
    )


async def _change(request: web.Request, patch: EventTypePatch) -> web.Response:
    written = await _catalog(request).write(
        request.match_info["name"],
        lambda before: WriteOutcome.MISSING if before is None else _patched(before, patch),
    )
    if written.outcome is WriteOutcome.MISSING or written.record is None:
        raise _missing()
    return web.json_response(event_type_json(written.record))


@routes.patch("/v1/event-types/{name}")
async def patch_event_type(request: web.Request) -> web.Response:
    _operator_only(request)
    parsed, _ = await read_json(request, services(request).settings.max_payload_bytes)
    return await _change(request, validate(EventTypePatch, parsed))


@routes.delete("/v1/event-types/{name}")
async def archive_event_type(request: web.Request) -> web.Response:
    """Archived, not deleted: producers may still send the type (unchecked), and its name
    stays taken, so events of it never come to mean something else."""
    _operator_only(request)
    return await _change(request, EventTypePatch(archived=True))


async def _document(request: web.Request) -> Any:
    """The OpenAPI document, as JSON or YAML, within the body's size and shape limits."""
    settings = services(request).settings
    if request.content_type not in YAML_TYPES:
        parsed, _ = await read_json(request, settings.max_payload_bytes)
        return parsed
    raw = await read_body(request, settings.max_payload_bytes)
    try:
        loaded = yaml.load(raw, Loader=yaml.CSafeLoader)  # the safe loader, in C
    except yaml.YAMLError as exc:
        raise ProblemError(400, f"The body is not valid YAML: {exc}.") from None
    # Before anything walks it: YAML's aliases can make a small body a huge tree.
    check_shape(loaded, ShapeLimits.of(settings))
    try:
        # As JSON would have it: YAML's dates, binary values and integer keys are not.
        return orjson.loads(orjson.dumps(loaded, option=orjson.OPT_NON_STR_KEYS))
    except TypeError as exc:
        raise ProblemError(400, f"The YAML holds a value JSON cannot: {exc}.") from None


def _import_error(name: str | None, at: str, detail: str) -> dict[str, str | None]:
    return {"name": name, "pointer": at, "detail": detail}


def _first_errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{pointer(e['loc']) or '/'}: {e['msg']}" for e in exc.errors(include_url=False)
    )


@routes.post("/v1/event-types/import")
async def import_event_types(request: web.Request) -> web.Response:
    _operator_only(request)
    found = read_webhooks(await _document(request))
    errors = [_import_error(e.name, e.pointer, e.detail) for e in found.errors]
    if not found.types and errors:
        raise ProblemError(
            422,
            "The document has no webhooks to import.",
            errors=[{"pointer": str(e["pointer"]), "detail": str(e["detail"])} for e in errors],
        )
    outcomes: dict[WriteOutcome, list[str]] = {o: [] for o in WriteOutcome}
    store = _catalog(request)
    for imported in found.types:
        at = pointer(["webhooks", imported.name])
        try:
            fields = EventTypeIn.model_validate(
                {
                    "name": imported.name,
                    "description": imported.description,
                    "schema": imported.schema,
                    "examples": imported.examples,
                    "group": imported.group,
                    "deprecated": imported.deprecated,
                }
            )
        except ValidationError as exc:
            errors.append(_import_error(imported.name, at, _first_errors(exc)))
            continue
        problems = definition_errors(fields.json_schema, fields.examples)
        if problems:
            detail = "; ".join(f"{p['pointer']}: {p['detail']}" for p in problems)
            errors.append(_import_error(imported.name, at, detail))
            continue
        now = now_ms()
        written = await store.write(fields.name, partial(record_of, fields, now))
        if written.outcome is WriteOutcome.FULL:
            errors.append(_import_error(imported.name, at, str(_full().detail)))
        else:
            outcomes[written.outcome].append(fields.name)
    return web.json_response(_import_reply(outcomes, errors))


def _import_reply(
    outcomes: Mapping[WriteOutcome, list[str]], errors: list[dict[str, str | None]]
) -> dict[str, Any]:
    return {
        "created": outcomes[WriteOutcome.CREATED],
        "updated": outcomes[WriteOutcome.UPDATED],
        "unchanged": outcomes[WriteOutcome.UNCHANGED],
        "errors": errors,
    }
