"""The cost lane on a fleet: every counting replay goes to a worker of the lab's
measurement identity with a free CPU.

Counts do not depend on the host's hardware (the simulated caches are fixed and stored
with each result), but they do on the software that counts (host.py: dbregress, the
loadgen binary, valgrind, libc). The replays go to the workers of one identity (the
resource `count:<key>`, as many as the host has CPUs), several per host (one per CPU, as
a local lane runs them), and never beside a time-lane unit: a unit takes all of its
host's CPUs (the `cpus` resource). The coordinator plans the replays exactly as a local
lane does (the windows come from its run folder), the worker fetches the build and
counts, and the replay's record and files come back to the coordinator's run folder and
history.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import threading
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, cast

from dbregress import benchmarks
from dbregress.collect import valgrind
from dbregress.cost.lane import Lane
from dbregress.cost.replay import Replay, count_replay, kill_below
from dbregress.engines.base import Sizes
from dbregress.execution import prepare
from dbregress.explain.jobs import Choice
from dbregress.fleet.ship import inside
from dbregress.lab.file import Column, Comparison, Lab, load_lab
from dbregress.method import identity as method
from dbregress.model import interrupts
from dbregress.model.errors import Interrupted, LabError
from dbregress.shapes.fleet import ReplayOutcome
from dbregress.shapes.host import CountIdentity, Fingerprint
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.replay import EngineSizes
from dbregress.store import replays as replay_store
from dbregress.store.files import write_atomic
from dbregress.store.history_rows import fingerprint_of

CPUS = "cpus"  # a worker has as many as its host has CPUs; a replay takes one


def count_resource(key: str) -> str:
    """What the workers of one measurement identity have (host.identity_key)."""
    return f"count:{key}"


class ReplayRequest(TypedDict):
    """One counting replay for a worker of the lab's measurement identity (a Dask task's
    argument: its windows go as they are, pickled)."""

    run: str
    lab_file: str
    lab_text: str
    comparison: str
    column: str
    number: int
    steps: list[str] | None  # None: every step
    choices: dict[str, Choice]  # step -> its window


def replay_resources(identity: CountIdentity) -> dict[str, float]:
    """A replay takes a CPU of a worker of the lab's measurement identity."""
    return {CPUS: 1, count_resource(identity["key"]): 1}


class FleetLane(Lane):
    def __init__(
        self,
        run: Path,
        lab: Lab,
        notify: Any,
        client: Any,
        hosts: Mapping[str, Fingerprint],
        identity: CountIdentity,
    ):
        """`identity`: the measurement identity the replays run with (host.count_identity),
        its workers in identity["hosts"]."""
        counting = {n: h for n, h in hosts.items() if n in identity["hosts"]}
        cpus = sum(int(h.get("cpu_count") or 1) for h in counting.values())
        super().__init__(run, lab, notify, workers=max(cpus, 1))
        self.client = client
        self.hosts = counting
        self.identity = identity

    def _fetch(self, column: Column) -> None:
        return None  # each worker fetches the builds of its replays

    def _count_method(self) -> MethodIdentity:
        """The workers' method identity: this dbregress's constants (caches, cost model,
        counting profile) with the chosen identity's loadgen, valgrind, libc and CPU
        features; the count store takes replays of it only (cost/reuse.py)."""
        return {
            "dbregress": self.identity.get("dbregress") or "",
            "loadgen_sha256": self.identity.get("loadgen_sha256"),
            "valgrind": self.identity.get("valgrind_version"),
            "libc": self.identity.get("libc") or "",
            "caches": " ".join(valgrind.CACHES),
            "cost_model": method.COST_MODEL,
            "counting_profile": method.COUNTING_PROFILE,
            "cpu_features": self.identity.get("cpu_features"),
        }

    def _counting_host(self, comp: Comparison, own: str | None) -> tuple[Sizes | None, str | None]:
        """The engine sizes the counting workers size the comparison's engines with
        (each from its own memory), and their host class; each None where they differ
        or a worker does not say it: the store's replays are then not taken (the sizes
        a replay will run with are not known), and each counted one is stored at its
        own sizes."""
        memory = {h.get("mem_total_bytes") for h in self.hosts.values()}
        mem = next(iter(memory)) if len(memory) == 1 else None
        classes = {
            fingerprint_of({k: h.get(k) for k in ("machine", "cpu_model", "cpu_count", "mem_gib")})
            for h in self.hosts.values()
        }
        sizes = benchmarks.engine_sizes(comp, mem) if isinstance(mem, int) else None
        return sizes, next(iter(classes)) if len(classes) == 1 else None

    def _require(self) -> None:
        if not self.hosts:  # count_identity refuses this before; a lane never runs without
            raise LabError("no worker of the lab's measurement identity: no replay can run")

    def _run_all(self, todo: list[Replay]) -> None:
        from distributed import as_completed

        futures = {}
        interrupts.check()  # a Ctrl-C lost before the replays are handed out
        for replay in todo:
            payload: ReplayRequest = {
                "run": self.run.name,
                "lab_file": self.lab.path.name,
                "lab_text": self.lab.text,
                "comparison": replay.comparison.name,
                "column": replay.column.label,
                "number": replay.number,
                "steps": sorted(replay.steps) if replay.steps is not None else None,
                "choices": self.choices[replay.column.label],
            }
            future = self.client.submit(
                count_on_worker,
                payload,
                key=f"{self.run.name}/cost/{replay.name}",
                pure=False,
                resources=replay_resources(self.identity),
            )
            futures[future] = replay
        try:
            done = as_completed(list(futures), loop=self.client.loop)  # type: ignore[no-untyped-call]
            for future in done:
                replay = futures[future]
                try:
                    outcome: ReplayOutcome | None = future.result()
                except Exception as e:  # the task itself failed (its workers kept dying)
                    outcome = {
                        "record": {
                            "comparison": replay.comparison.name,
                            "column": replay.column.label,
                            "replay": replay.number,
                            "build": str(replay.column.build),
                            "status": "failed",
                            "error": {"type": type(e).__name__, "message": str(e)},
                            "steps": {},
                            "took_s": 0.0,
                        },
                        "files": {},
                    }
                if outcome is None:
                    continue
                for rel, data in outcome["files"].items():
                    write_atomic(inside(self.run, rel), data)
                self._keep(replay, outcome["record"])
        except KeyboardInterrupt as e:
            for future in futures:
                future.cancel()
            name = e.args[0] if e.args else "SIGINT"
            raise Interrupted(
                f"interrupted ({name}) in the cost lane; finished replays are in "
                f"{self.run / replay_store.COST_DIR}; continue with `dbregress run --resume "
                f"{self.run} --scheduler ADDR`"
            ) from None


def count_on_worker(payload: ReplayRequest) -> ReplayOutcome | None:
    """The Dask task of one replay: count it here; its record and files."""
    from distributed import get_worker

    from dbregress import provision
    from dbregress.execution.execute import work_root
    from dbregress.fleet.unit import _me, _still_wanted

    worker = get_worker()
    me = _me(worker)
    key = worker.get_current_task()
    crc = f"{zlib.crc32(payload['run'].encode()):08x}"
    base = work_root() / f"cost-{crc}"
    name = f"{payload['column']}.{payload['number']}"
    work = base / f"w{zlib.crc32(name.encode()):08x}"
    scratch = Path(me["scratch"]) / f"cost-{crc}-{name}"
    out = scratch / "out"
    cancelled = threading.Event()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(1.0):
            if not _still_wanted(worker, key):
                cancelled.set()
                kill_below(work)
                return

    threading.Thread(target=watch, daemon=True).start()
    try:
        scratch.mkdir(parents=True, exist_ok=True)
        lab_file = scratch / payload["lab_file"]
        lab_file.write_text(payload["lab_text"])
        lab = load_lab(lab_file)
        comp = next(c for c in lab.comparisons if c.name == payload["comparison"])
        column = next(c for c in comp.columns if c.label == payload["column"])
        steps = frozenset(payload["steps"]) if payload["steps"] is not None else None
        replay = Replay(comp, column, payload["number"], steps)
        build = provision.fetch(column.build)
        record = count_replay(lab, replay, build, payload["choices"], work, out, cancelled)
        if record is None:
            return None
        record["host"] = me["name"]
        # the sizes it ran with, from this worker's memory: the count store keys by them
        record["engine_sizes"] = cast(EngineSizes, dataclasses.asdict(prepare.engine_sizes(comp)))
        rel_root = Path(replay_store.COST_DIR) / column.label / f"r{replay.number}"
        files = {
            str(rel_root / f.relative_to(out)): f.read_bytes()
            for f in sorted(out.rglob("*"))
            if f.is_file()
        }
        return {"record": record, "files": files}
    finally:
        done.set()
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
        with contextlib.suppress(OSError):  # another replay of the run may still use it
            base.rmdir()
