"""Where a command's answer goes: JSON for scripts, text for people, notes to stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import orjson


@dataclass
class Output:
    json: bool
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    def show(self, data: Any, text: Callable[[], str]) -> None:
        """``data`` as JSON under --json; otherwise what ``text`` makes of it."""
        if self.json:
            self.out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            self.out.write(text() + "\n")
        self.out.flush()

    def note(self, message: str) -> None:
        """For people only (never in --json output): hints such as how to get the next page."""
        if not self.json:
            self.err.write(message + "\n")

    def next_page(self, cursor: str | None) -> None:
        if cursor:
            self.note(f"more: --cursor {cursor}")
