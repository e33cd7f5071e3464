"""The PATCH bodies of the ``… update`` commands: only what was given goes in the body, and a
``--no-…`` option sends null, which clears the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def set_or_clear(
    fields: dict[str, Any],
    name: str,
    given: Any,
    *,
    clear: bool,
    convert: Callable[[Any], object] | None = None,
) -> None:
    """``name`` as null with ``clear`` (its ``--no-…`` option), else as the option's value
    when one was given (not None), through ``convert`` if any (a file read, pairs made a
    dict); neither given, the field stays out and the API keeps it."""
    if clear:
        fields[name] = None
    elif given is not None:
        fields[name] = given if convert is None else convert(given)
