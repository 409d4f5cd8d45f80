"""Spies the engine tests share."""

from __future__ import annotations

import subprocess

import pytest


def server_waits(monkeypatch: pytest.MonkeyPatch, pid: int) -> list[float | None]:
    """From now on, the timeout of every wait for process `pid`, in order."""
    waits: list[float | None] = []
    real_wait = subprocess.Popen.wait

    def wait(self: subprocess.Popen[bytes], timeout: float | None = None) -> int:
        if self.pid == pid:
            waits.append(timeout)
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    return waits
