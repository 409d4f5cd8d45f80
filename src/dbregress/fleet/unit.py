"""One unit of a lab, as a fleet worker runs it (the Dask task).

The worker fetches the unit's builds through its own build cache (once per host: the
cache keeps them), runs the unit with the ordinary runner into a scratch run folder, and
sends every change to the coordinator as it happens (ship.py). The scratch folder is
removed at the end: the coordinator's store is the only copy.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any, cast

from dbregress.fleet.ship import ShippingWriter
from dbregress.lab.file import Job, Lab, load_lab
from dbregress.model import interrupts
from dbregress.shapes.fleet import Message, UnitOutcome, UnitRequest, WorkerState
from dbregress.shapes.host import Fingerprint

# Each worker's state, by its name: set by `dbregress worker` before it joins the fleet
# (one per process there; a simulated fleet holds many in one process).
WORKERS: dict[str, WorkerState] = {}


def worker_state(name: str, scratch: Path, fingerprint: Fingerprint) -> WorkerState:
    state: WorkerState = {
        "name": name,
        "scratch": str(scratch),
        "fingerprint": fingerprint,
        "warmed": set(),  # (run, comparison) whose warm-up job this host has run
        "stopping": False,  # told to stop: the running unit goes elsewhere
    }
    WORKERS[name] = state
    return state


def worker_fingerprint(dask_worker: Any) -> Fingerprint | None:
    """Run on every worker by the coordinator: the fingerprint `dbregress worker` made."""
    state = WORKERS.get(dask_worker.name)
    return state["fingerprint"] if state else None


def unit_jobs(lab: Lab, comparison: str, number: int) -> list[Job]:
    """The jobs of a unit: round `number` of the comparison, or its warm-up job (0)."""
    comp = next(c for c in lab.comparisons if c.name == comparison)
    return lab.warmup_jobs(comp) if number == 0 else lab.round(comp, number)


def unit_name(comparison: str, number: int) -> str:
    return f"{comparison}/warm-up" if number == 0 else f"{comparison}/round {number}"


class Cancelled(KeyboardInterrupt):
    """The coordinator no longer wants this unit (Ctrl-C there, or the run was given up)."""


def _me(worker: Any) -> WorkerState:
    # A worker `dbregress worker` did not start: an empty fingerprint stands for its own.
    return WORKERS.get(worker.name) or worker_state(
        str(worker.name), Path("/var/tmp/dbregress/fleet-scratch"), cast(Fingerprint, {})
    )


def _still_wanted(worker: Any, key: Any) -> bool:
    """False once the scheduler released this task (cancelled by the coordinator) or the
    worker was told to stop."""
    if _me(worker)["stopping"]:
        return False
    ts = worker.state.tasks.get(key)
    return ts is not None and ts.state not in ("cancelled", "released", "forgotten")


def _watch(worker: Any, key: Any, done: threading.Event) -> None:
    """While the unit runs: once it is no longer wanted, kill its engine's processes, so
    the running step fails at once rather than at its end."""
    while not done.wait(1.0):
        if not _still_wanted(worker, key):
            interrupts.hurry_now()
            return


def _warm_up(lab: Lab, payload: UnitRequest, scratch: Path) -> None:
    """The comparison's warm-up job on a host that has not run it in this run: a host's
    first job is often an outlier (cold caches, a build's first start). Its results are
    discarded: the recorded warm-up job ran on the host that took the warm-up unit."""
    from dbregress.execution.runner import Runner

    jobs = unit_jobs(lab, payload["comparison"], 0)
    if not jobs:
        return
    quiet = ShippingWriter(scratch, lab, payload["record"], lambda m: None, "warm-up", "-")
    try:
        runner = Runner(lab, scratch.parent, writer=quiet, history=False, notify=lambda s: None)
        runner.run_unit(jobs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_unit(payload: UnitRequest) -> UnitOutcome:
    """Run one unit; returns every message it sent (ship.Receiver.finish)."""
    from distributed import Reschedule, get_worker

    from dbregress.execution.runner import Runner

    started = time.time()
    worker = get_worker()
    me = _me(worker)
    key = worker.get_current_task()
    topic = payload["topic"]
    attempt = uuid.uuid4().hex
    host = me["name"]

    def send(msg: Message) -> None:
        worker.log_event(topic, msg)
        if msg["kind"] == "step" and not _still_wanted(worker, key):
            raise Cancelled("SIGINT")  # at a step's end; the runner records the interrupt

    scratch_root = Path(me["scratch"])
    scratch = scratch_root / f"{payload['run']}-{attempt[:8]}"
    lab_dir = scratch_root / f"lab-{attempt[:8]}"
    done = threading.Event()
    threading.Thread(target=_watch, args=(worker, key, done), daemon=True).start()
    try:
        lab_dir.mkdir(parents=True, exist_ok=True)
        lab_file = lab_dir / payload["lab_file"]
        lab_file.write_text(payload["lab_text"])
        lab = load_lab(lab_file)
        jobs = unit_jobs(lab, payload["comparison"], payload["number"])
        writer = ShippingWriter(scratch, lab, payload["record"], send, payload["unit"], attempt)
        writer.start(jobs, host)
        warmed = (payload["run"], payload["comparison"])
        if payload["number"] > 0 and warmed not in me["warmed"]:
            _warm_up(lab, payload, scratch_root / f"warm-{attempt[:8]}")
        me["warmed"].add(warmed)
        runner = Runner(lab, scratch_root, writer=writer, history=False, notify=lambda s: None)
        # Cancelled: recorded as interrupted; the coordinator has stopped listening.
        with contextlib.suppress(Cancelled):
            runner.run_unit(jobs)
        if me["stopping"]:  # the worker was told to stop: the unit runs elsewhere
            raise Reschedule()
        return {
            "unit": payload["unit"],
            "attempt": attempt,
            "host": host,
            "messages": writer.sent,
            "started": started,  # the worker's clock (time.time())
            "ended": time.time(),
        }
    finally:
        done.set()
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(lab_dir, ignore_errors=True)
