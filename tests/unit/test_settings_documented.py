"""Every setting has its row in the README's configuration table, and every row a setting."""

from __future__ import annotations

import re
from pathlib import Path

from webhook_service.config import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def _documented() -> set[str]:
    """The variables named in the first cell of the configuration table's rows."""
    section = README.read_text().split("\n## Configuration\n", 1)[1].split("\n#", 1)[0]
    first_cells = (line.split("|")[1] for line in section.splitlines() if line.startswith("| `"))
    return {name for cell in first_cells for name in re.findall(r"`(WEBHOOK_\w+)`", cell)}


def test_every_setting_has_a_row_and_every_row_a_setting() -> None:
    settings = {f"WEBHOOK_{name.upper()}" for name in Settings.model_fields}
    assert settings == _documented()
