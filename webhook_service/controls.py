"""Characters that steer a terminal or reorder text rather than show: the C0 and C1 control
characters, DEL, and the bidirectional marks, embeddings, overrides and isolates.

One list for both ends. The API refuses them in the endpoint fields people read (URL,
description); the admin command line writes each one it prints as a visible escape, since
receivers' answers, payloads and errors come from outsiders: ``ESC [2K`` and a carriage
return would let a receiver's ``500`` body print itself as ``200 OK``.
"""

from __future__ import annotations

import re

_STEERING = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"

# Everything above, tab and line feed included: for one-line fields.
CONTROLS = re.compile(f"[\\t\\n{_STEERING}]")
# Tab and line feed only move the cursor on or down, never back over what was written:
# multi-line output (a response body, an event's data) keeps them.
_STEERING_IN_TEXT = re.compile(f"[{_STEERING}]")


def _escape(found: re.Match[str]) -> str:
    # Python's own spelling: \x1b, \r, \x9b, \u202e.
    return repr(found.group())[1:-1]


def visible(text: str) -> str:
    """``text`` with every steering character but tab and line feed written as its escape."""
    return _STEERING_IN_TEXT.sub(_escape, text)


def json_safe(dumped: str) -> str:
    """Serialized JSON with the steering characters its encoder leaves raw (DEL, C1, bidi)
    written as ``\\u`` escapes: the same JSON value, safe to show on a terminal."""
    return _STEERING_IN_TEXT.sub(lambda found: f"\\u{ord(found.group()):04x}", dumped)
