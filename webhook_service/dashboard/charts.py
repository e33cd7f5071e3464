"""Small charts as inline SVG, drawn on the server: no script, no library, no request.

Colours come from CSS classes (``static/dashboard.css``), so a chart follows the page's
style and the Content-Security-Policy needs no inline styles. Each mark carries a
``<title>``, which browsers show on hover and screen readers read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from webhook_service.dashboard.markup import Markup, join, render

_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 8, 10, 20


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    css: str  # the class that colours it: ok, bad, warn, p50, p95


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value`` (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power * (1 + 1e-9):
            return float(step * power)
    return float(10 * power)


def _number(value: float) -> str:
    return f"{value:g}" if value < 10_000 else f"{value / 1000:g}k"


def _frame(width: int, height: int, top: float, unit: str, labels: Sequence[str]) -> list[Markup]:
    """Axis lines, the top and zero values, and the first and last time labels."""
    bottom = height - _BOTTOM
    parts = [
        render(
            '<line class="axis" x1="$x" y1="$y" x2="$x2" y2="$y"/>',
            x=_LEFT,
            y=bottom,
            x2=width - _RIGHT,
        ),
        render(
            '<line class="grid" x1="$x" y1="$y" x2="$x2" y2="$y"/>',
            x=_LEFT,
            y=_TOP,
            x2=width - _RIGHT,
        ),
        render(
            '<text class="tick" x="$x" y="$y" text-anchor="end">$t</text>',
            x=_LEFT - 4,
            y=_TOP + 4,
            t=f"{_number(top)}{unit}",
        ),
        render(
            '<text class="tick" x="$x" y="$y" text-anchor="end">0</text>', x=_LEFT - 4, y=bottom
        ),
    ]
    if labels:
        parts.append(
            render('<text class="tick" x="$x" y="$y">$t</text>', x=_LEFT, y=height - 4, t=labels[0])
        )
        parts.append(
            render(
                '<text class="tick" x="$x" y="$y" text-anchor="end">$t</text>',
                x=width - _RIGHT,
                y=height - 4,
                t=labels[-1],
            )
        )
    return parts


def _svg(width: int, height: int, title: str, body: Sequence[Markup], css: str) -> Markup:
    return render(
        '<svg class="$css" viewBox="0 0 $w $h" width="$w" height="$h" role="img" '
        'aria-label="$title" xmlns="http://www.w3.org/2000/svg">$body</svg>',
        css=css,
        w=width,
        h=height,
        title=title,
        body=join(body),
    )


def figure(caption: str, chart: Markup, series: Sequence[Series]) -> Markup:
    """A chart with its caption and the key to its colours."""
    return render(
        "<figure><figcaption>$caption</figcaption>$chart$key</figure>",
        caption=caption, chart=chart, key=legend(series),
    )  # fmt: skip


def legend(series: Sequence[Series]) -> Markup:
    items = [
        render('<li><span class="key $css"></span>$name</li>', css=s.css, name=s.name)
        for s in series
    ]
    return render('<ul class="legend">$items</ul>', items=join(items))


def stacked_bars(
    series: Sequence[Series],
    labels: Sequence[str],
    *,
    title: str,
    unit: str = "",
    width: int = 560,
    height: int = 150,
) -> Markup:
    """One bar per label, the series stacked bottom up; each segment has its tooltip."""
    count = len(labels)
    totals = [sum(s.values[i] or 0 for s in series) for i in range(count)]
    top = nice_ceiling(max(totals, default=0))
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    slot = plot_w / max(count, 1)
    body = _frame(width, height, top, unit, labels)
    for i, label in enumerate(labels):
        base = 0.0
        for s in series:
            value = s.values[i] or 0
            if value <= 0:
                continue
            y_top = _TOP + plot_h * (1 - (base + value) / top)
            body.append(
                render(
                    '<rect class="$css" x="$x" y="$y" width="$w" height="$h">'
                    "<title>$label: $value $name</title></rect>",
                    css=s.css,
                    x=f"{_LEFT + i * slot + slot * 0.1:.1f}",
                    y=f"{y_top:.1f}",
                    w=f"{slot * 0.8:.1f}",
                    h=f"{plot_h * value / top:.1f}",
                    label=label,
                    value=_number(value),
                    name=s.name,
                )
            )
            base += value
    return _svg(width, height, title, body, "chart")


def line_chart(
    series: Sequence[Series],
    labels: Sequence[str],
    *,
    title: str,
    unit: str = "",
    width: int = 560,
    height: int = 150,
) -> Markup:
    """A line per series; a missing value (None) breaks the line rather than drawing a 0."""
    count = len(labels)
    seen = [v for s in series for v in s.values if v is not None]
    top = nice_ceiling(max(seen, default=0))
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    step = plot_w / max(count - 1, 1)
    body = _frame(width, height, top, unit, labels)

    def point(i: int, value: float) -> tuple[float, float]:
        return _LEFT + i * step, _TOP + plot_h * (1 - min(value, top) / top)

    for s in series:
        run: list[str] = []
        for i in range(count + 1):
            value = s.values[i] if i < count else None
            if value is not None:
                x, y = point(i, value)
                run.append(f"{x:.1f},{y:.1f}")
                body.append(
                    render(
                        '<circle class="$css" cx="$x" cy="$y" r="2">'
                        "<title>$label: $name $value$unit</title></circle>",
                        css=s.css,
                        x=f"{x:.1f}",
                        y=f"{y:.1f}",
                        label=labels[i],
                        name=s.name,
                        value=_number(round(value, 1)),
                        unit=unit,
                    )
                )
            elif run:
                body.append(
                    render('<polyline class="line $css" points="$p"/>', css=s.css, p=" ".join(run))
                )
                run = []
    return _svg(width, height, title, body, "chart")


def sparkline(
    series: Sequence[Series], *, title: str, width: int = 120, height: int = 26
) -> Markup:
    """Stacked bars without axes or labels: a table cell's worth of trend."""
    count = len(series[0].values) if series else 0
    totals = [sum(s.values[i] or 0 for s in series) for i in range(count)]
    top = max(totals, default=0) or 1
    slot = width / max(count, 1)
    body: list[Markup] = [render("<title>$t</title>", t=title)]
    for i in range(count):
        base = 0.0
        for s in series:
            value = s.values[i] or 0
            if value <= 0:
                continue
            body.append(
                render(
                    '<rect class="$css" x="$x" y="$y" width="$w" height="$h"/>',
                    css=s.css,
                    x=f"{i * slot:.1f}",
                    y=f"{height * (1 - (base + value) / top):.1f}",
                    w=f"{max(slot - 0.5, 0.5):.1f}",
                    h=f"{height * value / top:.1f}",
                )
            )
            base += value
    return _svg(width, height, title, body, "spark")


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    css: str
    note: str  # the tooltip


def bars(items: Sequence[Bar], *, title: str, unit: str = "", width: int = 640) -> Markup:
    """Horizontal bars, one per item, labelled on the left: e.g. each attempt's duration."""
    row, label_w = 18, 90
    height = row * len(items) + 4
    top = nice_ceiling(max((b.value for b in items), default=0))
    plot_w = width - label_w - 60
    body: list[Markup] = []
    for i, item in enumerate(items):
        y = 2 + i * row
        length = max(plot_w * item.value / top, 1)
        body.append(
            render(
                '<text class="tick" x="0" y="$ty">$label</text>'
                '<rect class="$css" x="$x" y="$y" width="$w" height="$h">'
                "<title>$note</title></rect>"
                '<text class="tick" x="$vx" y="$ty">$value$unit</text>',
                label=item.label,
                ty=y + 12,
                css=item.css,
                x=label_w,
                y=y,
                w=f"{length:.1f}",
                h=row - 5,
                note=item.note,
                vx=f"{label_w + length + 4:.1f}",
                value=_number(item.value),
                unit=unit,
            )
        )
    return _svg(width, height, title, body, "chart")
