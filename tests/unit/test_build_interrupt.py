"""An interrupted source build leaves no compiler running: make's children are in the
build command's own process group, and the whole group goes down with it (a SIGTERM to
`dbregress fetch` once left cmake and two clang++ compiling for minutes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

import pytest

from dbregress.provision.source.build import _run_group


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def test_an_interrupted_build_step_takes_its_whole_process_group_down(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # a "make" whose two "compilers" ignore nothing and run for minutes
    script = f"sleep 300 & echo $! >> {pids}; sleep 300 & echo $! >> {pids}; wait"

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt("SIGALRM")

    before = signal.signal(signal.SIGALRM, interrupt)
    try:
        with open(tmp_path / "log", "w") as out:
            signal.alarm(2)
            with pytest.raises(KeyboardInterrupt):
                _run_group(["sh", "-c", script], tmp_path, dict(os.environ), out)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    children = [int(line) for line in pids.read_text().split()]
    assert len(children) == 2
    for _ in range(50):
        if not _alive(children):
            break
        time.sleep(0.1)
    assert _alive(children) == []


def test_a_sigterm_to_fetch_stops_the_build_it_runs(tmp_path: Path) -> None:
    """`dbregress fetch` takes over SIGTERM, so a build it runs is stopped, not orphaned."""
    code = (
        "import sys, signal, os\n"
        "from dbregress.cli import main\n"
        "from dbregress.provision.source import build\n"
        "from pathlib import Path\n"
        f"d = Path('{tmp_path}')\n"
        "def fake(*a, **k):\n"
        "    script = f'sleep 300 & echo $! > {d}/pid; wait'\n"
        "    out = open(d / 'log', 'w')\n"
        "    return build._run_group(['sh', '-c', script], d, dict(os.environ), out)\n"
        "import dbregress.provision as p\n"
        "p.fetch = fake\n"
        "sys.exit(main.main(['fetch', 'postgres@17.2.0']))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    pid_file = tmp_path / "pid"
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.1)
    child = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    for _ in range(50):
        if not _alive([child]):
            break
        time.sleep(0.1)
    assert _alive([child]) == []
