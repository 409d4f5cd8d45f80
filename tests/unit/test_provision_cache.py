"""The build cache: atomic installs, no half-unpacked builds, safe concurrency."""

from __future__ import annotations

import stat
import threading
import time
from pathlib import Path

import pytest

from dbregress.provision import cache


def _populate(tmp: Path) -> dict[str, str]:
    (tmp / "bin").mkdir()
    tool = tmp / "bin" / "postgres"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o700)
    (tmp / "share.txt").write_text("x")
    (tmp / "share.txt").chmod(0o600)
    return {"source": "test"}


def test_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DBREGRESS_CACHE", str(tmp_path))
    assert cache.cache_root() == tmp_path
    monkeypatch.delenv("DBREGRESS_CACHE")
    monkeypatch.setattr(cache.os, "geteuid", lambda: 0)
    assert cache.cache_root() == Path("/var/cache/dbregress")
    monkeypatch.setattr(cache.os, "geteuid", lambda: 1000)
    assert cache.cache_root() == Path.home() / ".cache" / "dbregress"


def test_install_then_reuse(tmp_path: Path) -> None:
    final = tmp_path / "postgres" / "17.2.0"
    assert cache.install(final, _populate) == {"source": "test"}
    assert cache.read_spec(final) == {"source": "test"}
    # readable and traversable by others: the engine may run as nobody
    assert stat.S_IMODE((tmp_path / "postgres").stat().st_mode) == 0o755
    assert stat.S_IMODE((final / "bin").stat().st_mode) == 0o755
    assert stat.S_IMODE((final / "bin" / "postgres").stat().st_mode) == 0o755
    assert stat.S_IMODE((final / "share.txt").stat().st_mode) == 0o644
    assert cache.install(final, lambda tmp: pytest.fail("must reuse")) == {"source": "test"}


def test_failed_unpack_leaves_nothing(tmp_path: Path) -> None:
    final = tmp_path / "postgres" / "17.2.0"

    def broken(tmp: Path) -> dict[str, str]:
        (tmp / "bin").mkdir()
        (tmp / "bin" / "half").write_text("x")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        cache.install(final, broken)
    assert not final.exists()
    assert [p.name for p in final.parent.iterdir() if not p.name.endswith(".lock")] == []


def test_leftovers_of_a_killed_install_are_removed(tmp_path: Path) -> None:
    final = tmp_path / "postgres" / "17.2.0"
    final.parent.mkdir(parents=True)
    (final.parent / ".tmp-17.2.0-abcd").mkdir()  # a process died mid-unpack
    final.mkdir()  # a directory without a spec file is not a build
    (final / "junk").write_text("x")
    cache.install(final, _populate)
    assert sorted(p.name for p in final.parent.iterdir()) == [".17.2.0.lock", "17.2.0"]
    assert not (final / "junk").exists()


def test_concurrent_installs_populate_once(tmp_path: Path) -> None:
    final = tmp_path / "postgres" / "12.20.0"
    calls: list[int] = []

    def slow(tmp: Path) -> dict[str, str]:
        calls.append(1)
        time.sleep(0.2)
        return _populate(tmp)

    results: list[dict[str, str]] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.install(final, slow)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert results == [{"source": "test"}] * 3
