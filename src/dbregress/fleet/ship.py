"""How a unit's results travel from a worker to the coordinator's results store.

On the worker, the runner writes into a scratch run folder through a ShippingWriter: every
change it makes (a job's info, a finished step's files, a failure, a job's end with its
server log) is also sent to the coordinator as a message, the moment it is made, on a
Dask event topic of the run. The coordinator's Receiver applies each message to the real
run folder (and indexes each step in the history) as it arrives.

Every message carries its unit, the attempt (a fresh id each time a unit starts, on
whichever worker) and a sequence number. An attempt's first message, `start`, makes the
coordinator forget what an earlier attempt of the same unit left (a worker that died
mid-unit); messages of a superseded attempt are ignored. The unit's task also returns
every message it sent: the coordinator applies those it has not seen, so a message that
the event topic delivered late, or not at all, is not lost.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, cast

from dbregress.lab.file import Job, Lab
from dbregress.method import identity as method
from dbregress.model.errors import StoreError
from dbregress.model.records import StepResult
from dbregress.shapes.fleet import Message, MessageHeader, UnitOutcome
from dbregress.shapes.run import Failure, JobEntry, RunJson
from dbregress.store.files import write_atomic
from dbregress.store.run import RunWriter

Send = Callable[[Message], None]


class ShippingWriter(RunWriter):
    """A worker's scratch run folder whose every change is also sent to the coordinator."""

    def __init__(
        self, path: Path, lab: Lab, record: RunJson, send: Send, unit: str, attempt: str
    ) -> None:
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        path.chmod(0o755)
        self.path = path
        self.record = {**record, "jobs": {}, "failures": [], "builds": {}}
        self.record["page_cache"] = {"dropped": 0, "failed": None}
        write_atomic(path / "lab.toml", lab.text)
        self._send_out = send
        self.unit = unit
        self.attempt = attempt
        self.sent: list[Message] = []
        self.host = ""
        self._shipped: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime_ns)
        self._save()

    def send(self, msg: Message) -> None:
        self.sent.append(msg)
        self._send_out(msg)

    def _header(self) -> MessageHeader:
        """The next message's unit, attempt and number."""
        return {"unit": self.unit, "attempt": self.attempt, "seq": len(self.sent)}

    def start(self, jobs: list[Job], host: str) -> None:
        self.host = host
        self.send({**self._header(), "kind": "start", "jobs": [j.name for j in jobs], "host": host})

    # The methods below take what RunWriter's take, and send it on.

    def set_build(self, label: str, identity: dict[str, str]) -> None:
        super().set_build(label, identity)
        self.send({**self._header(), "kind": "build", "label": label, "identity": identity})

    def set_job(self, job: Job, info: JobEntry) -> None:
        # which host measured the job, and by what method (its own, not the
        # coordinator's): the history keys the job's figures by both
        info = {**info, "host": self.host, "method_identity": method.identity()}
        super().set_job(job, info)
        self.send({**self._header(), "kind": "job", "job": job.name, "info": info})

    def end_job(self, job: Job, status: str) -> None:
        super().end_job(job, status)
        files = self._changed(job)
        self.send(
            {**self._header(), "kind": "end", "job": job.name, "status": status, "files": files}
        )

    def add_failure_record(self, failure: Failure) -> None:
        super().add_failure_record(failure)
        self.send({**self._header(), "kind": "failure", "failure": failure})

    def note_cache_drop(self, failure: str | None) -> None:
        super().note_cache_drop(failure)
        self.send({**self._header(), "kind": "cache", "failure": failure})

    def write_step(self, job: Job, index: int, result: StepResult, series: Any, hlog: str) -> Path:
        path = super().write_step(job, index, result, series, hlog)
        rel = str(path.relative_to(self.path))
        files = self._changed(job)
        self.send(
            {
                **self._header(),
                "kind": "step",
                "job": job.name,
                "index": index,
                "result": rel,
                "files": files,
            }
        )
        return path

    def _changed(self, job: Job) -> dict[str, bytes]:
        """The job's files written or grown since they were last sent."""
        out: dict[str, bytes] = {}
        root = self.path / job.column.label / f"r{job.repeat}"
        for f in sorted(root.rglob("*")) if root.is_dir() else []:
            if not f.is_file():
                continue
            rel = str(f.relative_to(self.path))
            st = f.stat()
            if self._shipped.get(rel) == (st.st_size, st.st_mtime_ns):
                continue
            try:
                out[rel] = f.read_bytes()
            except OSError:
                continue
            self._shipped[rel] = (st.st_size, st.st_mtime_ns)
        return out


def inside(root: Path, rel: str) -> Path:
    """`rel` below `root`; a path that would leave it is refused."""
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise StoreError(f"a worker sent a file outside the run folder: {rel!r}")
    return root / p


class Receiver:
    """The coordinator's side: applies a run's messages to its RunWriter."""

    def __init__(
        self,
        writer: RunWriter,
        jobs: dict[str, Job],
        index_step: Callable[[StepResult, int], None],
        notify: Callable[[str], None],
    ) -> None:
        self.writer = writer
        self.jobs = jobs
        self.index_step = index_step
        self.notify = notify
        self.attempt: dict[str, str] = {}  # unit -> its current attempt
        self.host: dict[str, str] = {}  # unit -> the host of its current attempt
        self.applied: set[tuple[str, int]] = set()  # (attempt, seq)
        self.done: set[str] = set()  # units whose task returned
        self.steps_received = 0
        self.messages = 0
        self.busy_s = 0.0  # time spent storing what came (bench/fleet_overhead.py)

    def apply(self, msg: Message) -> None:
        t0 = time.monotonic()
        try:
            self._take(msg)
        finally:
            self.messages += 1
            self.busy_s += time.monotonic() - t0

    def _take(self, msg: Message) -> None:
        unit, attempt = msg["unit"], msg["attempt"]
        if unit in self.done or (attempt, msg["seq"]) in self.applied:
            return
        if msg["kind"] == "start":
            if unit in self.attempt and self.attempt[unit] != attempt:
                self.notify(
                    f"{unit}: started again on {msg['host']} (its attempt on "
                    f"{self.host.get(unit, '?')} was lost); what that attempt sent is dropped"
                )
            self.attempt[unit] = attempt
            self.host[unit] = msg["host"]
            for name in msg["jobs"]:
                job = self.jobs[name]
                self.writer.forget_job(job)
                self.writer.forget_failures(name)
        elif self.attempt.get(unit) != attempt:
            return  # a superseded attempt's (or one whose start is still on its way)
        else:
            self._apply(msg)
        self.applied.add((attempt, msg["seq"]))

    def finish(self, outcome: UnitOutcome) -> None:
        """The unit's task returned: every message it sent, in order."""
        for msg in outcome["messages"]:
            self.apply(msg)
        self.done.add(outcome["unit"])

    def _apply(self, msg: Message) -> None:
        # A message's files first, whatever its kind (end and step messages carry them):
        # each is checked to stay inside the run folder.
        for rel, data in cast("dict[str, bytes]", msg.get("files", {})).items():
            target = inside(self.writer.path, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, data)
        if msg["kind"] == "build":
            self.writer.set_build(msg["label"], msg["identity"])
        elif msg["kind"] == "job":
            self.writer.set_job(self.jobs[msg["job"]], msg["info"])
        elif msg["kind"] == "end":
            self.writer.end_job(self.jobs[msg["job"]], msg["status"])
        elif msg["kind"] == "failure":
            self.writer.add_failure_record(msg["failure"])
        elif msg["kind"] == "cache":
            self.writer.note_cache_drop(msg["failure"])
        elif msg["kind"] == "step":
            path = inside(self.writer.path, msg["result"])
            result = StepResult.from_json(json.loads(path.read_text()), str(path))
            self.steps_received += 1
            self.index_step(result, msg["index"])
