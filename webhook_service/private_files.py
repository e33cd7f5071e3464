"""Files and directories only their owner can read: the secrets ``webhook-service up``
generates, and the embedded Valkey's data (its password, and an AOF holding every payload).

Other local users must not read them: with the Valkey password, any process could give an
API key the ``admin`` scope. Root still can; nothing here protects against it.
"""

from __future__ import annotations

import os
from pathlib import Path

# For child processes that write such data (the embedded Valkey): whatever they create,
# directories and files, is for the owner only.
PRIVATE_UMASK = 0o077


def private_dir(path: Path) -> Path:
    """``path`` as a directory only its owner can enter, created if missing."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkdir leaves an existing directory's mode as it was: one made by an older version.
    path.chmod(0o700)
    return path


def write_private(path: Path, text: str) -> None:
    """``text`` in a file of mode 0600, replacing any file there."""
    # Unlinked rather than truncated: an old file keeps its mode, a new one is created with
    # 0600, so the content is never readable by others, not even for a moment.
    path.unlink(missing_ok=True)
    _create_private(path, text)


def secret_file(path: Path, make: str) -> str:
    """The secret kept in ``path``; the first time, ``make``, written there (mode 0600)."""
    if path.exists():
        return path.read_text().strip()
    _create_private(path, make + "\n")
    return make


def _create_private(path: Path, text: str) -> None:
    # O_EXCL: a file created meanwhile by another process is an error, never overwritten.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
