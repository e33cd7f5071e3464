"""Event types read out of an OpenAPI 3.1 document's ``webhooks`` section (no I/O).

Each webhook is one event type, named by its key. Of its operation (``post``, or the first
one with a body): the ``application/json`` request body's schema, with every local
``$ref`` into ``#/components/schemas`` copied into the schema's own ``$defs`` (so the type's
schema stands alone, recursive ones too); ``description``, else ``summary``; the media
type's ``example`` / ``examples`` (an Example Object's ``value``, or a ``$ref`` into
``#/components/examples``), else the schema's own ``examples``; ``x-group`` (of the
operation or its path item), else the first tag, as the group; ``deprecated``.

A body schema of the envelope we send (an object whose ``properties`` has both ``type``
and ``data``) gives its ``data`` property's schema, and each example its ``data``: ingest
checks an event's ``data``, not the envelope around it.

A webhook that cannot be read is an error naming it; the others are read all the same.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from webhook_service.api.problems import pointer

_OPERATIONS = ("post", "put", "patch", "get", "delete", "options", "head", "trace")
_SCHEMAS = "#/components/schemas/"
_EXAMPLES = "#/components/examples/"
_BODIES = "#/components/requestBodies/"
_JSON = "application/json"


class ImportProblem(ValueError):
    """What makes one webhook (or the whole document) unreadable."""


@dataclass(frozen=True)
class ImportedType:
    name: str
    description: str
    schema: dict[str, Any] | None
    examples: list[Any]
    group: str | None
    deprecated: bool


@dataclass(frozen=True)
class ImportFailure:
    name: str | None  # the webhook's key; None: the document as a whole
    pointer: str  # into the document
    detail: str


@dataclass
class Imported:
    types: list[ImportedType] = field(default_factory=list)
    errors: list[ImportFailure] = field(default_factory=list)


def read_webhooks(doc: Any) -> Imported:
    found = Imported()
    if not isinstance(doc, dict):
        found.errors.append(ImportFailure(None, "", "an OpenAPI document is a JSON object"))
        return found
    version = doc.get("openapi")
    if not isinstance(version, str) or not version.startswith("3.1."):
        # 3.0's schemas are not JSON Schema 2020-12, and it has no webhooks section.
        detail = "only OpenAPI 3.1 documents are read (openapi: 3.1.x)"
        found.errors.append(ImportFailure(None, "/openapi", detail))
        return found
    webhooks = doc.get("webhooks")
    if not isinstance(webhooks, dict) or not webhooks:
        found.errors.append(ImportFailure(None, "/webhooks", "the document has no webhooks"))
        return found
    for name, item in webhooks.items():
        try:
            found.types.append(_one(doc, str(name), item))
        except ImportProblem as exc:
            found.errors.append(ImportFailure(str(name), pointer(["webhooks", name]), str(exc)))
    return found


def _one(doc: dict[str, Any], name: str, item: Any) -> ImportedType:
    if not isinstance(item, dict):
        raise ImportProblem("a webhook is a Path Item Object")
    operation = _operation(item)
    media = _json_media(doc, operation)
    schema = None if media is None else media.get("schema")
    examples = [] if media is None else _media_examples(doc, media)
    enveloped = False
    if schema is not None:
        top = _deref(doc, schema)
        props = top.get("properties") if isinstance(top, dict) else None
        if isinstance(props, dict) and "type" in props and "data" in props:
            schema, enveloped = props["data"], True
        schema = standalone(doc, schema)
        if not examples and isinstance(schema, dict):
            examples = list(schema.get("examples") or [])
    if enveloped:
        examples = [e.get("data") if isinstance(e, dict) else e for e in examples]
    text = operation.get("description") or operation.get("summary") or ""
    group = operation.get("x-group") or item.get("x-group") or _first_tag(operation)
    return ImportedType(
        name=name,
        description=str(text).strip(),
        schema=schema,
        examples=examples,
        group=str(group) if group else None,
        deprecated=operation.get("deprecated") is True,
    )


def _operation(item: dict[str, Any]) -> dict[str, Any]:
    post = item.get("post")
    if isinstance(post, dict):
        return post
    operations = [item[m] for m in _OPERATIONS if isinstance(item.get(m), dict)]
    if not operations:
        raise ImportProblem("the webhook has no operation")
    with_body = [op for op in operations if "requestBody" in op]
    chosen: dict[str, Any] = (with_body or operations)[0]
    return chosen


def _json_media(doc: dict[str, Any], operation: dict[str, Any]) -> dict[str, Any] | None:
    body = operation.get("requestBody")
    if body is None:
        return None
    body = _follow(doc, body, _BODIES)
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, dict):
        raise ImportProblem("the request body has no content")
    media = content.get(_JSON)
    if media is None:
        raise ImportProblem(f"the request body has no {_JSON} content")
    if not isinstance(media, dict):
        raise ImportProblem("a Media Type Object is a JSON object")
    return media


def _media_examples(doc: dict[str, Any], media: dict[str, Any]) -> list[Any]:
    if "example" in media:
        return [media["example"]]
    examples = media.get("examples")
    if not isinstance(examples, dict):
        return []
    values = []
    for example in examples.values():
        example = _follow(doc, example, _EXAMPLES)
        if isinstance(example, dict) and "value" in example:
            values.append(example["value"])
    return values


def _first_tag(operation: dict[str, Any]) -> str | None:
    tags = operation.get("tags")
    return str(tags[0]) if isinstance(tags, list) and tags else None


def _follow(doc: dict[str, Any], value: Any, under: str) -> Any:
    """A Reference Object followed (once more while it leads to another) within ``under``."""
    for _ in range(8):
        if not (isinstance(value, dict) and isinstance(value.get("$ref"), str)):
            return value
        value = _target(doc, value["$ref"], under)
    raise ImportProblem("references lead to references too deep")


def _target(doc: dict[str, Any], ref: str, under: str) -> Any:
    if not ref.startswith(under):
        raise ImportProblem(f"only references into {under} are read, not {ref}")
    node: Any = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise ImportProblem(f"the reference {ref} leads nowhere")
        node = node[part]
    return node


def _deref(doc: dict[str, Any], schema: Any) -> Any:
    return _follow(doc, schema, _SCHEMAS)


def standalone(doc: dict[str, Any], schema: Any) -> Any:
    """``schema`` with every ``#/components/schemas/X`` it reaches (through others too)
    copied into its ``$defs`` as X and each reference pointed there."""
    root, pending = _rewritten(copy.deepcopy(schema))
    defs: dict[str, Any] = {}
    while pending:
        name = pending.pop()
        if name in defs:
            continue
        target, more = _rewritten(copy.deepcopy(_target(doc, _SCHEMAS + name, _SCHEMAS)))
        defs[name] = target
        pending.extend(more)
    if not defs:
        return root
    if not isinstance(root, dict):
        raise ImportProblem("a schema that references others is a JSON object")
    own = root.get("$defs", {})
    clash = sorted(set(own) & set(defs)) if isinstance(own, dict) else []
    if clash or not isinstance(own, dict):
        raise ImportProblem(f"the schema's own $defs clash with the components' {clash}")
    return {**root, "$defs": {**own, **defs}}


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    stack = [node]
    while stack:
        here = stack.pop()
        if isinstance(here, dict):
            yield here
            stack.extend(here.values())
        elif isinstance(here, list):
            stack.extend(here)


def _rewritten(schema: Any) -> tuple[Any, list[str]]:
    """References into the components pointed at ``$defs``, and the components' names;
    any other reference but one within the schema (``#…``) refused."""
    names: list[str] = []
    for node in _walk(schema):
        ref = node.get("$ref")
        if not isinstance(ref, str):
            continue
        if ref.startswith(_SCHEMAS):
            rest = ref[len(_SCHEMAS) :]
            node["$ref"] = "#/$defs/" + rest
            names.append(rest.split("/", 1)[0].replace("~1", "/").replace("~0", "~"))
        elif not ref.startswith("#"):
            raise ImportProblem(f"only references within the document are read, not {ref}")
        elif ref.startswith("#/components/"):
            raise ImportProblem(f"a schema may reference {_SCHEMAS}… only, not {ref}")
    return schema, names
