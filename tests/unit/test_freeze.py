"""freeze_tree stops a whole process tree, even one that keeps forking while it is
being stopped, and waits until the kernel shows every thread stopped."""

from __future__ import annotations

import subprocess
import sys
import time

from dbregress.collect.proc import tree_pids
from dbregress.engines.process import all_stopped, freeze_tree, kill_tree, thaw

# A parent that forks a short-lived busy child every millisecond or so and keeps up to
# eight of them: a listing of its tree is stale almost as soon as it is read.
_FORKER = """
import os, time
live = []
while True:
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + 0.05
        while time.monotonic() < end:
            pass
        os._exit(0)
    live.append(pid)
    while len(live) > 8:
        os.waitpid(live.pop(0), 0)
    time.sleep(0.001)
"""


def test_a_forking_tree_is_frozen_whole_and_thawed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _FORKER])
    try:
        time.sleep(0.3)
        for _ in range(20):
            stopped = freeze_tree(parent.pid)
            tree = tree_pids(parent.pid)
            assert parent.pid in stopped
            assert set(tree) <= set(stopped), (tree, stopped)  # nobody escaped
            assert all_stopped(tree)
            thaw(stopped)
            time.sleep(0.02)
        assert not all_stopped([parent.pid])  # running again
    finally:
        kill_tree(parent)


def test_a_gone_root_freezes_nothing() -> None:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    assert freeze_tree(done.pid) == []
