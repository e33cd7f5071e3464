"""Aligned tables: columns as wide as their widest cell, numbers on the right, long cells
clipped, wide characters counted as two columns."""

from __future__ import annotations

from webhook_service.admin.tables import Column, clip, render, render_fields, width


def test_columns_line_up_and_numbers_align_right() -> None:
    text = render(["ID", Column("COUNT", right=True), "NAME"], [("a", 5, "x"), ("bbb", 120, "yy")])
    assert text.splitlines() == [
        "ID   COUNT  NAME",
        "a        5  x",
        "bbb    120  yy",
    ]


def test_an_empty_table_still_has_its_header() -> None:
    assert render(["ID", "URL"], []) == "ID  URL"


def test_long_cells_are_clipped_with_an_ellipsis_and_kept_on_one_line() -> None:
    text = render([Column("URL", max_width=10)], [("https://example.com/hooks",), ("a\nb",)])
    assert text.splitlines() == ["URL", "https://e…", "a b"]


def test_wide_characters_take_two_columns() -> None:
    assert width("日本") == 4
    assert width("e\u0301") == 1  # a combining accent takes none
    lines = render(["NAME", "N"], [("日本", 1), ("abcde", 2)]).splitlines()
    assert [width(line.split("  ")[0].rstrip()) for line in lines] == [4, 4, 5]
    assert lines[1] == "日本   1"


def test_clip_counts_columns_not_characters() -> None:
    assert clip("日本語のテキスト", 7) == "日本語…"
    assert clip("short", 7) == "short"


def test_fields_align_their_labels() -> None:
    assert render_fields([("id", "ep_1"), ("description", "x")]).splitlines() == [
        "id           ep_1",
        "description  x",
    ]
