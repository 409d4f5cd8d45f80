"""Killing a loadgen that is still printing never raises in the thread that reads its
output: that thread's traceback would reach the user's terminal (a fault-suite case,
a server frozen until its step timed out, saw one on a busy host)."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from dbregress.loadgen.client import Loadgen
from dbregress.shapes.spec import StepSpec

# Stands in for the loadgen (the wrapper execs it): prints events as fast as it can.
CHATTY = ("sh", "-c", 'while :; do echo \'{"type": "interval", "t_s": 0}\'; done', "sh")


def test_a_killed_chatty_loadgen_leaves_its_reader_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    spec: StepSpec = {}  # type: ignore[typeddict-item]  # never read: sh ignores it
    for i in range(40):
        loadgen = Loadgen(spec, tmp_path / f"{i}.json", tmp_path / f"{i}.stderr", None, CHATTY)
        events = loadgen.events(poll_s=0.01)
        # it is printing (a busy host may start sh later than one poll)
        for polls in itertools.count():
            assert polls < 3000, "the chatty loadgen printed nothing in 30 s"
            if next(events) is not None:
                break
        loadgen.kill()
        # what was read before the kill drains, then the stream ends (not a stream that
        # stays open with nothing in it: its reader died)
        idle = 0
        for event in events:
            idle = idle + 1 if event is None else 0
            assert idle < 500, "the event stream never ended"
    assert raised == []
