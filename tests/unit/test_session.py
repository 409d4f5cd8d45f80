"""The engine session (session.py): a post-step wait checks every live engine as it
passes, and the clean-up stops every engine and removes every work directory, whatever
happens."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from dbregress.engines.base import Engine
from dbregress.execution.session import EngineSession
from dbregress.model.errors import EngineCrashed


class FakeEngine:
    """What a session calls of an Engine, counted."""

    def __init__(self, crash_after: int | None = None, stop_fails: bool = False) -> None:
        self.started = self.stopped = self.checks = 0
        self.crash_after, self.stop_fails = crash_after, stop_fails

    def start(self) -> None:
        self.started += 1

    def stop(self) -> None:
        self.stopped += 1
        if self.stop_fails:
            raise OSError("stop failed")

    def check_alive(self) -> None:
        self.checks += 1
        if self.crash_after is not None and self.checks > self.crash_after:
            raise EngineCrashed("the server died")

    def hurry(self) -> None:
        return None


def fakes(*engines: FakeEngine) -> list[Engine]:
    """The fakes as the session sees them (it calls only what FakeEngine has)."""
    return [cast(Engine, e) for e in engines]


def test_a_wait_checks_each_live_engine_throughout_and_reports(tmp_path: Path) -> None:
    up, never = FakeEngine(), FakeEngine()
    seen: list[float] = []
    with EngineSession(fakes(up, never), [], each_stopped=True) as s:
        s.start(fakes(up)[0])
        s.settle(1.2, lambda elapsed, left, rate: seen.append(elapsed))
    assert up.checks >= 3  # every half second at least
    assert never.checks == 0  # not started: not checked
    assert len(seen) == up.checks
    assert up.stopped == never.stopped == 1


def test_a_crash_during_a_wait_is_raised_and_the_data_still_removed(tmp_path: Path) -> None:
    work = tmp_path / "data"
    work.mkdir()
    engine = FakeEngine(crash_after=1)
    with pytest.raises(EngineCrashed), EngineSession(fakes(engine), [work]) as s:
        s.start(fakes(engine)[0])
        s.settle(5.0)
    assert engine.stopped == 1 and not work.exists()


def test_a_failed_stop_keeps_the_others_stopping_when_each_is_stopped(tmp_path: Path) -> None:
    bad, good = FakeEngine(stop_fails=True), FakeEngine()
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    with EngineSession(fakes(bad, good), dirs, each_stopped=True):
        pass
    assert bad.stopped == good.stopped == 1 and not any(d.exists() for d in dirs)
    alone = FakeEngine(stop_fails=True)
    with pytest.raises(OSError), EngineSession(fakes(alone), [dirs[0]]):
        pass


def test_a_retired_engine_is_stopped_and_no_longer_checked() -> None:
    a, b = FakeEngine(), FakeEngine()
    s = EngineSession(fakes(a, b), [], each_stopped=True)
    for engine in fakes(a, b):
        s.start(engine)
    s.retire(fakes(a)[0])
    s.settle(0.1)
    assert a.stopped == 1 and a.checks == 0 and b.checks == 1
    s.close()
    assert (a.stopped, b.stopped) == (2, 1)  # stop is idempotent: the clean-up stops all
