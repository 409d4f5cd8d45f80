"""The cost lane's plan of replays from the ones a run already holds: a failed replay
runs again under a new number (at most RETRIES a column), counting every step when it
stands for one of the first count_replays; an engine that always fails stops there."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from dbregress.cost.lane import Lane
from dbregress.cost.planning import RETRIES
from dbregress.cost.replay import Replay
from dbregress.lab.file import load_lab
from dbregress.model.errors import Interrupted
from dbregress.store.replays import save_replay

STEPS = ("fillseq", "readrandom")


def lane(tmp_path: Path) -> Lane:
    path = tmp_path / "lab.toml"
    path.write_text(
        'name = "retry"\nbenchmark = "kv"\ncount = true\ncount_replays = 2\n'
        'count_replays_max = 2\n[[column]]\nlabel = "a"\nbuild = "null@1"\n'
        '[[column]]\nlabel = "b"\nbuild = "null@1"\n'
    )
    run = tmp_path / "run"
    run.mkdir()
    out = Lane(run, load_lab(path), lambda _: None, workers=1)
    # the windows the lane sized from the time lane (only their step names matter here)
    out.choices = {label: dict.fromkeys(STEPS) for label in ("a", "b")}
    return out


def replay(label: str, n: int, ok: bool, value: float = 1000.0) -> dict[str, Any]:
    if not ok:
        return {"column": label, "replay": n, "status": "failed", "error": {"type": "X"}}
    per_op = {"estimated_cycles": value, "instructions": value}
    return {
        "column": label,
        "replay": n,
        "status": "ok",
        "steps": {s: {"per_op": per_op} for s in STEPS},
    }


def planned(ln: Lane) -> list[tuple[str, int, Any]]:
    return [(r.column.label, r.number, r.steps) for r in ln._missing()]


def test_a_failed_replay_runs_again_counting_every_step(tmp_path: Path) -> None:
    ln = lane(tmp_path)
    assert planned(ln) == [("a", 1, None), ("a", 2, None), ("b", 1, None), ("b", 2, None)]
    save_replay(ln.run, "a", 1, replay("a", 1, ok=False))
    for label, n in (("a", 2), ("b", 1), ("b", 2)):
        save_replay(ln.run, label, n, replay(label, n, ok=True))
    assert planned(ln) == [("a", 3, None)]
    save_replay(ln.run, "a", 3, replay("a", 3, ok=True))
    assert planned(ln) == []


def test_an_engine_that_always_fails_stops_after_the_retries(tmp_path: Path) -> None:
    ln = lane(tmp_path)
    for n in (1, 2):
        save_replay(ln.run, "b", n, replay("b", n, ok=True))
    n = 0
    while (todo := [r for r in planned(ln) if r[0] == "a"]) and n < 10:
        for _, number, _ in todo:
            save_replay(ln.run, "a", number, replay("a", number, ok=False))
        n += 1
    failed = sorted((ln.run / "cost" / "a").glob("r*.json"))
    assert len(failed) == 2 + RETRIES and not todo


def test_ctrl_c_while_replays_are_handed_over_cancels_them_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C that lands while the lane hands its replays to the pool: the replays
    already handed over are cancelled, not waited for to their end."""
    ln = lane(tmp_path)
    started = threading.Event()
    ended: list[str] = []

    def one(replay: Replay) -> None:  # a replay that runs until it is cancelled
        started.set()
        while not ln.cancelled.is_set():
            time.sleep(0.01)
        ended.append(replay.name)

    monkeypatch.setattr(ln, "_one", one)
    monkeypatch.setattr(ln, "_kill_all", lambda: None)
    submit = ThreadPoolExecutor.submit
    first = True

    def submit_once_then_interrupt(pool: ThreadPoolExecutor, fn: Any, *args: Any) -> Any:
        nonlocal first
        if first:
            first = False
            return submit(pool, fn, *args)
        started.wait(5)
        raise KeyboardInterrupt("SIGINT")

    monkeypatch.setattr(ThreadPoolExecutor, "submit", submit_once_then_interrupt)
    with pytest.raises(Interrupted, match="in the cost lane"):
        ln._run_all(ln._missing())
    assert ended == ["a/c1"]  # the replay under way was told to stop, and did
