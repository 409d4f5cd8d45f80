"""Helpers for driving the dbregress command line as a user would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private DBREGRESS_WORKDIR reachable by the engine's user (0755 chain)."""
    path = Path("/var/tmp") / f"dbregress-test-{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir(mode=0o755)
    yield path
    assert_no_process_mentions(str(path))
    subprocess.run(["rm", "-rf", str(path)], check=False)


def cli_env(workdir: Path) -> dict[str, str]:
    return {**os.environ, "DBREGRESS_WORKDIR": str(workdir)}


def dbregress(*args: str, cwd: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbregress.cli.main", *args],
        cwd=cwd,
        env=cli_env(workdir),
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture
def launched() -> Iterator[list[subprocess.Popen[str]]]:
    """dbregress processes a test started; any still running at teardown are killed."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def start_dbregress(
    launched: list[subprocess.Popen[str]], *args: str, cwd: Path, workdir: Path
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dbregress.cli.main", *args],
        cwd=cwd,
        env=cli_env(workdir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    launched.append(proc)
    return proc


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        try:  # a server's children name only themselves ("postgres: checkpointer")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            cwd = ""
        if text in cmdline or cwd.startswith(text):
            found.append(int(entry.name))
    return found


def assert_no_process_mentions(text: str) -> None:
    deadline = time.monotonic() + 5
    while (left := processes_mentioning(text)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left running: {left}"


def wait_for(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def run_record(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """The one run folder under tmp_path/results, and its run.json."""
    runs = list((tmp_path / "results").glob("*/run.json"))
    assert len(runs) == 1, runs
    return runs[0].parent, json.loads(runs[0].read_text())


def step_results(run: Path, job: str) -> dict[str, dict[str, Any]]:
    """A job's stored step results by step name, in step order."""
    files = sorted((run / job / "steps").glob("[0-9][0-9]-*.json"))
    loaded = [json.loads(f.read_text()) for f in files if not f.name.endswith(".spec.json")]
    return {r["step"]: r for r in loaded}
