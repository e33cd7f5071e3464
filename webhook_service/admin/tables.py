"""Aligned plain-text tables for people; scripts use ``--json`` instead.

Cells are made ``visible`` before they are measured, so a control character from outside
is shown as its escape and the columns still line up.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from webhook_service.controls import visible

ELLIPSIS = "…"
GAP = "  "


def width(text: str) -> int:
    """Terminal columns: East Asian wide characters take two, combining marks none."""
    total = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        total += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return total


def clip(text: str, limit: int) -> str:
    """At most ``limit`` columns, on one line; what is cut is marked with an ellipsis."""
    text = " ".join(visible(text).split())
    if width(text) <= limit:
        return text
    kept, used = [], 0
    for char in text:
        step = width(char)
        if used + step > limit - 1:
            break
        kept.append(char)
        used += step
    return "".join(kept) + ELLIPSIS


@dataclass(frozen=True)
class Column:
    title: str
    # Numbers line up on the right; a long column is clipped to max_width.
    right: bool = False
    max_width: int = 60


def _pad(text: str, size: int, right: bool) -> str:
    fill = " " * (size - width(text))
    return fill + text if right else text + fill


def render(columns: Sequence[Column | str], rows: Sequence[Sequence[object]]) -> str:
    """Columns as wide as their widest cell; an empty table still shows its header."""
    cols = [c if isinstance(c, Column) else Column(c) for c in columns]
    cells = [[clip(str(value), col.max_width) for value, col in zip(row, cols, strict=True)]
             for row in rows]  # fmt: skip
    sizes = [max([width(col.title), *(width(r[i]) for r in cells)]) for i, col in enumerate(cols)]
    lines = [[col.title for col in cols], *cells]
    out = [
        GAP.join(
            _pad(text, size, col.right) for text, size, col in zip(line, sizes, cols, strict=True)
        ).rstrip()
        for line in lines
    ]
    return "\n".join(out)


def render_fields(fields: Sequence[tuple[str, object]]) -> str:
    """One record as ``label  value`` lines, labels aligned; long values are kept whole."""
    size = max((width(label) for label, _ in fields), default=0)
    return "\n".join(
        f"{_pad(label, size, False)}{GAP}{visible(str(value))}".rstrip() for label, value in fields
    )
