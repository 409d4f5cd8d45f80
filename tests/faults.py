"""The fault suite: run a small two-column PostgreSQL lab, inject one fault at a random
point (seeded), and check what must hold afterwards.

Used by tests/e2e/test_faults.py (one case per kind, in `make test`) and by
bench/fault_suite.py (many seeds per kind, the table in docs/reliability.md).

What must hold after every fault:
- every step result written before the fault is still on disk and readable, unchanged;
- the faulty step is recorded with its cause (when the results can still be written);
- run.json says what happened;
- no process of the run is left (server, backends, loadgen), and the data directories
  are gone;
- the lab went on to the next job where that makes sense (the fault hit one job only).
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("DBREGRESS_CACHE", "/var/cache/dbregress"))
BUILD = "postgres@17.2.0"  # job a's build; job b runs OTHER
OTHER = "postgres@12.20.0"
STEPS = ["l.i0", "l.x", "l.i1", "qr100", "qp100"]
KINDS = (
    "server-kill",
    "server-stop",
    "loadgen-kill",
    "client-panic",
    "ctrl-c",
    "ctrl-c-twice",
    "sigterm",
    "results-disk-full",
    "data-disk-full",
    "corrupted-build",
    "never-ready",
)
# The error each fault must be recorded with, in the faulty job's failed step.
EXPECTED_ERROR = {
    "server-kill": ("EngineCrashed", "LoadgenError"),
    "server-stop": ("StepTimeout",),
    "loadgen-kill": ("LoadgenError",),
    "client-panic": ("LoadgenError",),
    "ctrl-c": ("Interrupted",),
    "ctrl-c-twice": ("Interrupted",),
    "sigterm": ("Interrupted",),
    "results-disk-full": (),  # nothing can be written: the lab stops with the cause
    "data-disk-full": ("EngineCrashed", "LoadgenError", "EngineError"),
    "corrupted-build": ("EngineError", "PermissionError", "OSError"),
    "never-ready": ("EngineError",),
}
INTERRUPTS = ("ctrl-c", "ctrl-c-twice", "sigterm")


@dataclass
class Outcome:
    kind: str
    seed: int
    point: str = ""  # where the fault was injected
    exit_code: int | None = None
    finished_before: int = 0  # step results on disk when the fault was injected
    found_after: int = 0  # of those, still on disk, readable and unchanged afterwards
    orphans: list[str] = field(default_factory=list)
    recorded: bool = False  # the faulty step (or job) is recorded with the expected cause
    went_on: bool = False  # the other job ran (or, for an interrupt, the resume finished)
    status: str = ""  # run.json's status
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def lab_text(kind: str) -> str:
    text = (
        'name = "faults"\nplacement = "same"\nwarmup_job = false\norder = "fixed"\n'
        'schedule = "jobs"\n'
        "step_timeout_s = 10\n"
    )
    if kind == "never-ready":
        # job b must still start in time on a busy host (3 of 5 failed at 5 s while
        # valgrind ran beside the suite)
        text += "start_timeout_s = 12\n"
    for label, build in (("a", BUILD), ("b", OTHER)):
        text += f'[[column]]\nlabel = "{label}"\nbuild = "{build}"\nconfig = "ci"\n'
    return text + (
        "[insert]\nclients = 1\nload_rows = 20000\nwrite_rows = 3000\nquery_seconds = 1\n"
        f"warmup_s = 0\ncleanup_wait_s = 0\nsteps = {json.dumps(STEPS)}\n"
    )


class Case:
    """One fault of one kind at a point drawn from `seed`, in its own folder."""

    def __init__(self, kind: str, seed: int, root: Path) -> None:
        self.kind, self.seed, self.root = kind, seed, root
        self.rng = random.Random(f"{kind}-{seed}")
        self.results = root / "results"
        self.work = Path("/var/tmp") / f"dbregress-fault-{os.getpid()}-{kind}-{seed}"
        self.cache = root / "cache"
        self.mounts: list[Path] = []
        self.filler: Path | None = None
        self.out = Outcome(kind, seed)
        self.env = {**os.environ, "DBREGRESS_WORKDIR": str(self.work)}

    # -- set-up ------------------------------------------------------------------------
    def _tmpfs(self, path: Path, size: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path], check=True
        )
        self.mounts.append(path)

    def _corrupt_cache(self) -> None:
        """A cache holding the build with its server binary truncated."""
        engine, version = BUILD.split("@")
        real = CACHE / engine / version
        fake = self.cache / engine / version
        fake.mkdir(parents=True)
        for entry in real.iterdir():
            if entry.name != "bin":
                (fake / entry.name).symlink_to(entry)
        shutil.copytree(real / "bin", fake / "bin")
        (fake / "bin" / "postgres").write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 57)
        other = OTHER.split("@")[1]
        for name in ("versions.json", other):  # the other build stays whole
            if (CACHE / engine / name).exists():
                (self.cache / engine / name).symlink_to(CACHE / engine / name)
        for d in (self.cache, self.cache / engine):
            d.chmod(0o755)
        self.env["DBREGRESS_CACHE"] = str(self.cache)

    def setup(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        self.work.mkdir(mode=0o755)
        if self.kind == "results-disk-full":
            self._tmpfs(self.results, "32m")
        if self.kind == "data-disk-full":
            self._tmpfs(self.work, "400m")
        if self.kind == "corrupted-build":
            self._corrupt_cache()
        if self.kind == "client-panic":
            after = self.rng.randrange(50, 5000)
            self.env["DBREGRESS_LOADGEN_FAULT"] = f"panic:client=1:after_ops={after}"
            self.out.point = f"client 1 panics after {after} ops of every step"
        lab = self.root / "lab.toml"
        lab.write_text(lab_text(self.kind))
        return lab

    # -- driving -------------------------------------------------------------------------
    def _dbregress(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "dbregress.cli.main", *args, "--results", str(self.results)],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def _run_dir(self) -> Path | None:
        runs = list(self.results.glob("*/run.json"))
        return runs[0].parent if runs else None

    def _finished(self) -> dict[Path, bytes]:
        run = self._run_dir()
        if run is None:
            return {}
        files = run.glob("*/r*/steps/[0-9][0-9]-*.json")
        out = {}
        for f in files:
            if not f.name.endswith(".spec.json"):
                try:
                    out[f] = f.read_bytes()
                except OSError:
                    continue
        return out

    def _wait(self, condition: Callable[[], object], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def _inject_at_random_step(self, proc: subprocess.Popen[str]) -> dict[Path, bytes]:
        """Wait until job `a` runs a step drawn from the seed, a drawn moment into it;
        inject the fault; return the step results on disk at that moment."""
        index = self.rng.randrange(1, len(STEPS) + 1)
        delay = self.rng.uniform(0.0, 0.8)
        step = f"{index:02d}-{STEPS[index - 1]}"
        self.out.point = f"a/r1 step {step}, {delay:.2f} s after it started"

        def started() -> bool:
            run = self._run_dir()
            return run is not None and (run / "a" / "r1" / "steps" / f"{step}.spec.json").exists()

        self._wait(lambda: started() or proc.poll() is not None, 180, f"step {step}")
        time.sleep(delay)
        if self.kind == "loadgen-kill":
            return self._kill_a_loadgen(proc)
        before = self._finished()
        self._inject(proc)
        return before

    def _kill_a_loadgen(self, proc: subprocess.Popen[str]) -> dict[Path, bytes]:
        """SIGKILL job a's loadgen. A short step's loadgen may have done its work by the
        drawn moment (the kill then lands after its summary, and the step rightly
        stands), and the setup between two steps has none: the kill then goes to job a's
        next loadgen, until one dies before its step's result is written."""
        missed: set[str] = set()

        def loadgens() -> list[tuple[int, str]]:
            found = []
            for pid in _matching(
                lambda cmd, cwd: (
                    "dbregress-loadgen" in cmd
                    and f"{self.results}/" in cmd
                    and "/a/r1/steps/" in cmd
                )
            ):
                stem = re.search(r"/a/r1/steps/([^/\s]+)\.spec\.json", _cmdline(pid))
                if stem and stem.group(1) not in missed:
                    found.append((pid, stem.group(1)))
            return found

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            self._wait(lambda: loadgens() or proc.poll() is not None, 60, "a loadgen")
            targets = loadgens()
            if not targets:
                if proc.poll() is not None:
                    break
                # the loadgen seen a moment ago ended before this look (l.i0 at these
                # sizes lasts about 0.1 s): wait for the next one (CI seed 878887)
                continue
            before = self._finished()
            for pid, _stem in targets:
                with _gone():
                    os.kill(pid, signal.SIGKILL)
            stems = {stem for _pid, stem in targets}
            run = self._run_dir()
            assert run is not None  # job a's loadgen runs, so the run folder exists
            steps = run / "a" / "r1" / "steps"

            written = [steps / f"{stem}.json" for stem in stems]
            self._wait(
                functools.partial(_settled, proc, written, run),
                60,
                "the killed loadgen's step to end",
            )
            if not any(_stood(path) for path in written):
                self.out.point += f" (killed the loadgen of {', '.join(sorted(stems))})"
                return before
            missed |= stems
        self.out.problems.append("harness: no loadgen of job a could be killed mid-step")
        return {}

    def _inject(self, proc: subprocess.Popen[str]) -> None:
        kind = self.kind
        if kind in ("server-kill", "server-stop"):
            pids = self._postmasters()
            sig = signal.SIGKILL if kind == "server-kill" else signal.SIGSTOP
            if sig == signal.SIGSTOP:  # the whole server: backends run in sessions of their own
                pids = self._server_processes()
            for pid in pids:
                with _gone():
                    os.kill(pid, sig)
        elif kind in ("ctrl-c", "ctrl-c-twice"):
            proc.send_signal(signal.SIGINT)
            if kind == "ctrl-c-twice":
                time.sleep(self.rng.uniform(0.0, 0.5))
                proc.send_signal(signal.SIGINT)
        elif kind == "sigterm":
            proc.send_signal(signal.SIGTERM)
        elif kind in ("results-disk-full", "data-disk-full"):
            target = self.results if kind == "results-disk-full" else self.work
            self.filler = target / "filler"
            _fill(self.filler)

    def _stop_at_start(self, proc: subprocess.Popen[str]) -> None:
        """SIGSTOP job a's server as soon as its postmaster exists, before it is ready."""
        self.out.point = "job a's server stopped during its start"
        self._wait(lambda: self._postmasters() or proc.poll() is not None, 180, "a postmaster")
        for pid in self._server_processes():
            with _gone():
                os.kill(pid, signal.SIGSTOP)

    def _server_processes(self) -> list[int]:
        """The postmaster and every process it started (they work in its data directory)."""
        return _matching(lambda cmd, cwd: cwd.startswith(str(self.work)))

    def _postmasters(self) -> list[int]:
        pids = []
        for path in self.work.glob("**/postmaster.pid"):
            try:
                pids.append(int(path.read_text().splitlines()[0]))
            except (OSError, ValueError, IndexError):  # being written or removed
                continue
        return pids

    # -- checking -----------------------------------------------------------------------
    def run(self) -> Outcome:
        try:
            self._run()
        except Exception as e:  # the harness itself: reported as a problem, not raised
            self.out.problems.append(f"harness: {type(e).__name__}: {e}")
        finally:
            self.cleanup()
        return self.out

    def _run(self) -> None:
        lab = self.setup()
        proc = self._dbregress("run", str(lab))
        before: dict[Path, bytes] = {}
        if self.kind == "never-ready":
            self._stop_at_start(proc)
        elif self.kind == "corrupted-build":
            self.out.point = "start of job a"
        elif self.kind != "client-panic":
            before = self._inject_at_random_step(proc)
        try:
            _, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            self.out.problems.append("dbregress did not finish within 300 s")
        self.out.exit_code = proc.returncode
        if self.kind in (
            "server-stop",
            "never-ready",
        ):  # wake whatever is left, so nothing lingers stopped
            for pid in _matching(lambda cmd, cwd: cwd.startswith(str(self.work))):
                with _gone():
                    os.kill(pid, signal.SIGCONT)
        if self.filler is not None:
            self.filler.unlink(missing_ok=True)
        self._check(before, err)

    def _check(self, before: dict[Path, bytes], err: str) -> None:
        out = self.out
        out.finished_before = len(before)
        after = self._finished()
        out.found_after = sum(1 for f, data in before.items() if after.get(f) == data)
        for f in before:
            if after.get(f) != before[f]:
                out.problems.append(f"{f.name} changed or vanished")
        for f, data in after.items():
            try:
                json.loads(data)
            except ValueError:
                out.problems.append(f"{f} is not readable JSON")
        out.orphans = self._orphans()
        if out.orphans:
            out.problems.append(f"processes left: {out.orphans}")
        left = [p for p in self.work.iterdir() if p.name != "filler"] if self.work.exists() else []
        if left:
            out.problems.append(f"data directories left: {[p.name for p in left]}")
        expected_exit = 130 if self.kind in INTERRUPTS else 2
        if out.exit_code != expected_exit:
            out.problems.append(f"exit {out.exit_code}, expected {expected_exit}: {err[-300:]}")
        if "Traceback" in err:
            tail = err[err.index("Traceback") :][-1200:]
            out.problems.append(f"a traceback reached the user: {tail}")
        run = self._run_dir()
        if run is None:
            out.problems.append("no run folder")
            return
        record = json.loads((run / "run.json").read_text())
        out.status = record["status"]
        self._check_recorded(run, record, err)
        self._check_went_on(run, record)

    def _check_recorded(self, run: Path, record: dict[str, Any], err: str) -> None:
        out = self.out
        if self.kind == "results-disk-full":
            out.recorded = "No space left" in err or "cannot write" in err
            if not out.recorded:
                out.problems.append(f"the error does not say the disk is full: {err[-300:]}")
            return
        expected = EXPECTED_ERROR[self.kind]
        failed = [
            r
            for f in sorted((run / "a" / "r1" / "steps").glob("[0-9][0-9]-*.json"))
            if not f.name.endswith(".spec.json")
            and (r := json.loads(f.read_text())).get("status") == "failed"
        ]
        types = [r["error"]["type"] for r in failed]
        out.recorded = len(failed) == 1 and types[0] in expected and bool(record["failures"])
        if not failed and (self.kind in INTERRUPTS or self.kind == "data-disk-full"):
            # An interrupt that lands between two steps (a short step, a loaded host)
            # stops no step: it is recorded on the job. A disk filled late in job a's
            # last step, whose few remaining writes still fit in pages the table had,
            # never meets job a: job b, on the same full disk, fails with the cause.
            jobs = ("a/", "b/") if self.kind == "data-disk-full" else ("a/",)
            out.recorded = any(
                f["type"] in expected and f["where"].startswith(jobs) for f in record["failures"]
            )
        if not out.recorded:
            out.problems.append(f"job a's failed steps {types}, expected one of {expected}")
        if (
            self.kind == "client-panic"
            and failed
            and "injected fault" not in failed[0]["error"]["message"]
        ):
            out.problems.append("the panic's message is not in the failure")
        wanted = "interrupted" if self.kind in INTERRUPTS else "failed"
        if record["status"] != wanted:
            out.problems.append(f"run.json status {record['status']!r}, expected {wanted!r}")

    def _check_went_on(self, run: Path, record: dict[str, Any]) -> None:
        out = self.out
        if self.kind == "results-disk-full":
            out.went_on = True  # nothing can be stored: stopping is right
            return
        if self.kind in INTERRUPTS:
            proc = self._dbregress("run", "--resume", str(run))
            _, err = proc.communicate(timeout=300)
            record = json.loads((run / "run.json").read_text())
            jobs = record["jobs"]
            out.went_on = (
                proc.returncode == 0
                and record["status"] == "ok"
                and all(jobs.get(j, {}).get("status") == "ok" for j in ("a/r1", "b/r1"))
            )
            if not out.went_on:
                out.problems.append(f"resume: exit {proc.returncode}, {err[-300:]}")
            if self._orphans():
                out.problems.append("processes left after the resume")
            return
        job_b = record["jobs"].get("b/r1", {})
        out.went_on = job_b.get("status") in ("ok", "failed")
        if self.kind not in ("client-panic", "data-disk-full") and job_b.get("status") != "ok":
            out.problems.append(f"job b after the fault: {job_b.get('status')}")
        if not out.went_on:
            out.problems.append("the lab did not go on to job b")

    def _orphans(self) -> list[str]:
        deadline = time.monotonic() + 5
        while True:
            found = _matching(
                lambda cmd, cwd: (
                    str(self.root) in cmd or str(self.work) in cmd or cwd.startswith(str(self.work))
                )
            )
            if not found or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return [_cmdline(pid)[:80] for pid in found]

    def cleanup(self) -> None:
        for pid in _matching(
            lambda cmd, cwd: (
                str(self.root) in cmd or str(self.work) in cmd or cwd.startswith(str(self.work))
            )
        ):
            with _gone():
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        for mount in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(mount)], check=False)
        shutil.rmtree(self.work, ignore_errors=True)


class _gone:
    """Ignore a process that exited meanwhile."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, value: Any, tb: Any) -> bool:
        return kind is not None and issubclass(kind, ProcessLookupError)


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _stood(result: Path) -> bool:
    """The step's result is written and it did not fail: the kill came too late."""
    try:
        return bool(json.loads(result.read_text()).get("status") != "failed")
    except (OSError, ValueError):
        return False


def _settled(proc: subprocess.Popen[str], written: list[Path], run: Path) -> bool:
    """After a loadgen kill: its step's result written (failed: a hit; else a miss), or the
    runner past job a or ended."""
    return (
        proc.poll() is not None
        or any(path.exists() for path in written)
        or any(run.glob("b/r1/steps/*.spec.json"))
    )


def _matching(test: Callable[[str, str], bool]) -> list[int]:
    """Live processes (not zombies, not us) whose command line or working directory pass."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(entry / "cwd") if state != "Z" else ""
        except OSError:
            continue
        if state != "Z" and test(_cmdline(int(entry.name)), cwd):
            found.append(int(entry.name))
    return found


def _fill(path: Path) -> None:
    """Write zeros to `path` until its file system is full."""
    chunk = b"\0" * (1 << 20)
    try:
        with open(path, "wb") as f:
            while True:
                f.write(chunk)
                f.flush()
    except OSError:
        pass


def run_case(kind: str, seed: int, root: Path) -> Outcome:
    return Case(kind, seed, root).run()
