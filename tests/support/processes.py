"""Stopping a server a test started itself."""

from __future__ import annotations

import subprocess


def terminate(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, and SIGKILL should it not exit within ``timeout``; reaped either way."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
