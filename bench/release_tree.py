"""An earlier release's source tree, to run beside this one (bench/bench_log.py)."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

# Today's release: the last commit before the delivery log moved to SQL (issue 15).
RELEASE = "5c3a49f"


def export(commit: str, into: Path) -> Path:
    """The tree of ``commit`` in this repository, unpacked into ``into`` (``git archive``:
    no worktree to register, nothing left in .git)."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into
