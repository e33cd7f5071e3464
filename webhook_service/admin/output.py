"""Where a command's answer goes: JSON for scripts, text for people, notes to stderr.

Everything written goes through ``visible`` (or ``json_safe``): what we print comes from
receivers, producers and endpoint owners, and a control character in it would be obeyed by
the terminal (rewrite a line, retitle the window) instead of shown.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import orjson

from webhook_service.controls import json_safe, visible


@dataclass
class Output:
    json: bool
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    def show(self, data: Any, text: Callable[[], str]) -> None:
        """``data`` as JSON under --json; otherwise what ``text`` makes of it."""
        if self.json:
            dumped = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
            self.out.write(json_safe(dumped) + "\n")
        else:
            self.out.write(visible(text()) + "\n")
        self.out.flush()

    def note(self, message: str) -> None:
        """For people only (never in --json output): hints such as how to get the next page."""
        if not self.json:
            self.err.write(visible(message) + "\n")

    def error(self, message: str) -> None:
        """Why the command failed (--json or not): problem documents quote what was sent."""
        self.err.write(visible(message) + "\n")

    def next_page(self, cursor: str | None) -> None:
        if cursor:
            self.note(f"more: --cursor {cursor}")
