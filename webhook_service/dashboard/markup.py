"""A tiny HTML renderer: ``string.Template`` whose every value is escaped unless it is
already ``Markup``. Nothing from the API reaches a page unescaped."""

from __future__ import annotations

import html
from collections.abc import Iterable
from string import Template
from urllib.parse import quote, urlencode


class Markup(str):
    """Text that is HTML already: inserted as it is."""

    __slots__ = ()


def escape(value: object) -> Markup:
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def render(template: str, **values: object) -> Markup:
    """``$name`` placeholders filled with escaped values; a missing one is an error."""
    return Markup(Template(template).substitute({k: escape(v) for k, v in values.items()}))


def join(parts: Iterable[Markup | str], separator: str = "") -> Markup:
    """Markup parts as they are, text escaped."""
    return Markup(separator.join(escape(p) for p in parts))


def path(*segments: str) -> str:
    """A dashboard URL whose segments (ids from the API or a person) are percent-encoded."""
    return "/dashboard" + "".join("/" + quote(s, safe="") for s in segments)


def with_query(url: str, query: dict[str, str]) -> str:
    kept = {k: v for k, v in query.items() if v}
    return f"{url}?{urlencode(kept)}" if kept else url
