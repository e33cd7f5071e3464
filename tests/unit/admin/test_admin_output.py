"""What the command line prints can never steer the terminal: every control character that
outsiders put in an answer is written as a visible escape, in text and in JSON."""

from __future__ import annotations

import io
import unicodedata

import orjson
import pytest

from webhook_service.admin import views
from webhook_service.admin.output import Output
from webhook_service.admin.tables import render, width
from webhook_service.controls import visible

# A receiver's 500 body that, printed raw, erases its line, writes "200 OK" over the
# outcome column, and retitles the terminal window.
HOSTILE = "\x1b[2K\r200 OK\x1b]0;pwned\x07"
# Everything a terminal could obey: C0 but tab and line feed, DEL, C1.
STEERING = [
    chr(c) for c in range(0x100) if unicodedata.category(chr(c)) == "Cc" and chr(c) not in "\t\n"
]
BIDI = [
    "\u061c",
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
]


def _raw_steering(text: str) -> list[str]:
    return [char for char in text if char in STEERING or char in BIDI]


def test_the_list_is_every_c0_and_c1_control_and_del() -> None:
    assert len(STEERING) == 32 - 2 + 1 + 32


@pytest.mark.parametrize("char", STEERING + BIDI, ids=lambda c: f"U+{ord(c):04X}")
def test_every_steering_character_is_made_visible(char: str) -> None:
    shown = visible(f"a{char}b")
    assert _raw_steering(shown) == []
    assert shown.startswith("a") and shown.endswith("b") and len(shown) > 3


def test_escape_sequences_are_shown_as_python_writes_them() -> None:
    assert visible(HOSTILE) == "\\x1b[2K\\r200 OK\\x1b]0;pwned\\x07"
    assert visible("\x9b31m\x7f\u202eevil") == "\\x9b31m\\x7f\\u202eevil"


def test_tabs_line_feeds_and_printable_text_are_kept() -> None:
    text = "line one\n\tline two: é, 漢字, emoji 👍🏽, zero-width joiner 👩\u200d💻"
    assert visible(text) == text


def _printed(data: object, text: str, *, json: bool) -> str:
    out = io.StringIO()
    Output(json=json, out=out, err=io.StringIO()).show(data, lambda: text)
    return out.getvalue()


def test_text_output_shows_controls_as_escapes() -> None:
    printed = _printed({}, f"body: {HOSTILE}\u202e\x9b\nnext", json=False)
    assert _raw_steering(printed) == []
    assert printed.splitlines()[1] == "next"


def test_json_output_is_the_same_value_without_a_raw_control() -> None:
    data = {"response_body": HOSTILE + "\x7f\x85\x9b\u202e\u2066", "n": ["\x00"]}
    printed = _printed(data, "", json=True)
    assert _raw_steering(printed) == []
    assert orjson.loads(printed) == data


def test_notes_and_errors_are_made_visible_too() -> None:
    err = io.StringIO()
    out = Output(json=False, out=io.StringIO(), err=err)
    out.note(f"note {HOSTILE}")
    out.error(f"error: 422 {HOSTILE}")
    assert _raw_steering(err.getvalue()) == []


def test_a_hostile_cell_keeps_the_columns_aligned() -> None:
    table = render(["BODY", "NEXT"], [[HOSTILE, "x"], ["plain", "y"]])
    header, first, second = table.splitlines()
    assert _raw_steering(table) == []
    assert first.rindex("x") == second.rindex("y") == header.index("NEXT")
    assert width(first) == len(first)


def test_a_delivery_with_a_hostile_answer_prints_no_control() -> None:
    """What ``deliveries show`` prints, from the API's JSON of a delivery whose receiver
    answered 500 with a body that would otherwise print as a 200."""
    attempt = {
        "number": 1, "started_at": "2026-01-31T12:00:00.000Z", "duration_ms": 12,
        "status_code": 500, "error": None, "response_body": HOSTILE,
    }  # fmt: skip
    printed = _printed({}, views.attempts_table([attempt]), json=False)
    assert _raw_steering(printed) == []
    assert "500" in printed and "\\x1b[2K\\r200 OK" in printed
