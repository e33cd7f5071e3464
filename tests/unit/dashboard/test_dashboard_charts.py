"""Inline SVG charts: scaled to a round top value, every mark labelled, names escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from webhook_service.dashboard import charts
from webhook_service.dashboard.charts import Bar, Series

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize(
    ("value", "top"),
    [(0, 1), (0.3, 0.5), (1, 1), (3, 5), (7, 10), (10, 10), (11, 20), (180, 200), (501, 1000)],
)
def test_nice_ceiling(value: float, top: float) -> None:
    assert charts.nice_ceiling(value) == pytest.approx(top)


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # noqa: S314 - our own output


def test_stacked_bars_stack_and_scale_to_the_top_value() -> None:
    series = [Series("ok", [1, 0, 3], "ok"), Series("bad", [1, None, 1], "bad")]
    root = parse(charts.stacked_bars(series, ["a", "b", "c"], title="t", height=120))
    rects = root.findall(f"{SVG}rect")
    assert [r.get("class") for r in rects] == ["ok", "bad", "ok", "bad"]  # zeros draw nothing
    heights = [float(r.get("height", 0)) for r in rects]
    plot = 120 - 10 - 20
    # The tallest stack (3 + 1) reaches the top, 5; each segment is its share of that.
    assert heights == pytest.approx([plot / 5, plot / 5, plot * 3 / 5, plot / 5], abs=0.1)
    ok_c, bad_c = rects[2], rects[3]
    assert float(bad_c.get("y", 0)) + float(bad_c.get("height", 0)) == pytest.approx(
        float(ok_c.get("y", 0)), abs=0.1
    )  # the second series sits on the first
    assert [t.text for t in root.iter(f"{SVG}title")] == [
        "a: 1 ok",
        "a: 1 bad",
        "c: 3 ok",
        "c: 1 bad",
    ]
    assert [t.text for t in root.iter(f"{SVG}text")] == ["5", "0", "a", "c"]


def test_a_line_breaks_where_a_value_is_missing() -> None:
    svg = charts.line_chart(
        [Series("p95", [10, 20, None, 5, 8], "p95")], list("abcde"), title="t", unit=" ms"
    )
    root = parse(svg)
    lines = root.findall(f"{SVG}polyline")
    assert [len(line.get("points", "").split()) for line in lines] == [2, 2]
    assert len(root.findall(f"{SVG}circle")) == 4
    assert "b: p95 20 ms" in [t.text for t in root.iter(f"{SVG}title")]


def test_names_and_labels_are_escaped() -> None:
    svg = charts.stacked_bars([Series("<x>", [1], "ok")], ["<y>"], title="<z>")
    assert "<x>" not in svg and "<y>" not in svg and "<z>" not in svg
    parse(svg)  # still well-formed


def test_bars_are_proportional_and_empty_charts_still_draw() -> None:
    root = parse(charts.bars([Bar("#1", 50, "bad", "n1"), Bar("#2", 100, "ok", "n2")], title="t"))
    widths = [float(r.get("width", 0)) for r in root.findall(f"{SVG}rect")]
    assert widths[1] == pytest.approx(2 * widths[0])
    parse(charts.stacked_bars([], [], title="nothing"))
    parse(charts.line_chart([Series("p50", [None, None], "p50")], ["a", "b"], title="t"))
    spark = charts.sparkline([Series("a", [0, 0], "ok")], title="idle")
    assert not re.search(r"<rect", spark)
