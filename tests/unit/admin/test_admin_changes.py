"""set_or_clear: the PATCH field an option and its --no-… twin give."""

from __future__ import annotations

from typing import Any

from webhook_service.admin.changes import set_or_clear


def test_clear_sends_null_a_value_is_sent_converted_and_neither_leaves_the_field_out() -> None:
    fields: dict[str, Any] = {}
    set_or_clear(fields, "cleared", "ignored", clear=True, convert=str.upper)
    set_or_clear(fields, "given", [("k", "v")], clear=False, convert=dict)
    set_or_clear(fields, "plain", 0, clear=False)
    set_or_clear(fields, "absent", None, clear=False, convert=dict)
    assert fields == {"cleared": None, "given": {"k": "v"}, "plain": 0}
