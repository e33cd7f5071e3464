"""A script links only the preamble's definitions it names, and those they name."""

from __future__ import annotations

import pytest

from webhook_service.store.lua_link import definitions, needed

PREAMBLE = """-- The file's own comment, before any definition.

local A = {x = 1}
-- b's comment
-- on two lines
local function b()
  return A.x
end
local function c()
  -- a mention of d in a comment links nothing
  return b() + 1
end

-- A note of no definition's, a blank line below it.

local function d() return 4 end
local E = 'c d'  -- names in a string or a trailing comment may link one: never wrong
"""


def test_a_file_is_cut_at_each_top_level_definition_with_the_comment_above_it() -> None:
    cut = definitions(PREAMBLE)
    assert [d.name for d in cut] == ["A", "b", "c", "d", "E"]
    assert cut[0].text == "local A = {x = 1}"
    assert cut[1].text.startswith("-- b's comment\n-- on two lines\nlocal function b()")
    assert cut[1].text.endswith("end")
    assert cut[2].text.endswith("return b() + 1\nend")  # the stray note is no one's
    assert "The file's own comment" not in "".join(d.text for d in cut)


@pytest.mark.parametrize(
    ("body", "linked"),
    [
        ("return 1", []),
        ("return d()", ["d"]),
        ("return c()", ["A", "b", "c"]),  # c needs b, which needs A
        ("local x = c() + d()", ["A", "b", "c", "d"]),  # in the preamble's order
        ("-- c()\nreturn 1", []),  # a whole-line comment names nothing
        ("return A.b", ["A", "b"]),  # a field of a definition's name links it too
        ("return E", ["A", "b", "c", "d", "E"]),  # E's string names c and d
    ],
)
def test_a_body_links_what_it_names_and_what_that_names(body: str, linked: list[str]) -> None:
    assert [d.name for d in needed(definitions(PREAMBLE), body)] == linked


def test_a_name_defined_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        needed(definitions("local a = 1\nlocal a = 2"), "return a")
