"""The renderer escapes everything that is not Markup already, in text and attributes."""

from __future__ import annotations

import pytest

from webhook_service.dashboard.markup import Markup, escape, join, path, render, with_query

HOSTILE = "\"><script>alert('x')</script>&"


def test_values_are_escaped_in_text_and_in_attributes() -> None:
    html = render('<a title="$t">$t</a>', t=HOSTILE)
    assert "<script>" not in html and '"><' not in html
    assert html == (
        '<a title="&quot;&gt;&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;">'
        "&quot;&gt;&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;</a>"
    )


def test_markup_is_inserted_as_it_is_and_only_once_escaped() -> None:
    inner = render("<b>$x</b>", x="<i>")
    assert render("<p>$inner</p>", inner=inner) == "<p><b>&lt;i&gt;</b></p>"
    assert escape(escape("&")) == "&amp;"
    assert join([Markup("<br>"), "<br>"]) == "<br>&lt;br&gt;"


def test_a_missing_value_is_an_error_not_an_empty_string() -> None:
    with pytest.raises(KeyError):
        render("<p>$absent</p>")


def test_paths_encode_every_segment() -> None:
    assert path("deliveries", "dlv_1") == "/dashboard/deliveries/dlv_1"
    assert (
        path("endpoints", "../v1/api-keys?x=1") == "/dashboard/endpoints/..%2Fv1%2Fapi-keys%3Fx%3D1"
    )


def test_queries_drop_empty_values() -> None:
    assert with_query("/d", {"status": "failed", "event_id": ""}) == "/d?status=failed"
    assert with_query("/d", {"a": ""}) == "/d"
    assert with_query("/d", {"a": "x&b=y"}) == "/d?a=x%26b%3Dy"
