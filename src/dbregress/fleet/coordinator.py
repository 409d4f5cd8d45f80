"""The coordinator: `dbregress run LAB --scheduler ADDR` sends a lab's units to a fleet.

It keeps the run folder and the history (nothing stays on a worker), decides where each
comparison's time-lane units may run (host.py), adds rounds while steps are undecided
exactly as a local run does, and tells what runs where and what is left.

Where units go:
- the jobs schedule: all of a comparison's units on one host (its jobs' figures are
  compared unpaired, so they must share a host); if that host leaves the fleet, its
  units wait for it to come back (a worker started again under the same name);
- the interleaved schedule: a comparison's rounds on any host of one group of identical
  hosts, each round whole on one host (its pairs are within that host).
A unit whose worker dies is run again from its start (Dask reschedules it); what the lost
attempt sent is dropped.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import queue
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from dbregress.execution import rounds
from dbregress.execution.execute import ProgressFn
from dbregress.execution.runner import Runner
from dbregress.fleet import tls as fleet_tls
from dbregress.fleet.host import (
    COUNT_IDENTITY,
    can_count,
    count_identity,
    measurement_identity,
    methods_unlike,
    noisy_hosts,
    shown_value,
    unlike,
)
from dbregress.fleet.lane import CPUS, FleetLane
from dbregress.fleet.ship import Receiver
from dbregress.fleet.unit import run_unit, unit_jobs, unit_name, worker_fingerprint
from dbregress.lab.file import Comparison, Job, Lab
from dbregress.model.errors import LabError
from dbregress.model.interrupts import shielded
from dbregress.model.records import StepResult
from dbregress.shapes.fleet import Message, UnitOutcome, UnitRequest
from dbregress.shapes.host import (
    ChosenIdentity,
    CountIdentity,
    CountingHost,
    Fingerprint,
    HostEntry,
)
from dbregress.shapes.run import FleetUnit, RunJson
from dbregress.store.run import RunWriter

RESOURCE = "bench"  # one unit at a time per worker: two time-lane units never share a host


def host_resource(name: str) -> str:
    """The resource only the worker of that name has: a unit that needs it waits for that
    host, also while the host is away (a worker started again under that name takes it)."""
    return f"host:{name}"


def group_resource(group: str) -> str:
    return f"group:{group}"


STATUS_EVERY_S = 30.0


class Pending(Protocol):
    """A unit's Dask future, as far as the coordinator uses it."""

    def done(self) -> bool: ...

    def cancel(self) -> object: ...

    def result(self) -> UnitOutcome: ...


@dataclass
class Plan:
    """One comparison on the fleet: the hosts its units may use and its rounds so far."""

    comparison: Comparison
    hosts: list[str]
    resource: str  # what a worker must have to take its units (one host's, or a group's)
    cpus: int  # all of the host's: nothing runs beside a time-lane unit
    submitted: int = 0  # rounds
    finished: set[int] = field(default_factory=set)
    running: dict[str, Pending] = field(default_factory=dict)  # unit -> its future
    stopped: bool = False  # no more rounds


class FleetRunner(Runner):
    def __init__(
        self,
        lab: Lab,
        results_root: Path,
        scheduler: str,
        progress: ProgressFn | None = None,
        notify: Callable[[str], None] | None = None,
        resume: Path | None = None,
        history: bool = True,
        wait_for_workers_s: float = 60.0,
        tls: Path | None = None,
    ) -> None:
        """`tls`: this host's certificates (fleet/tls.py); by default $DBREGRESS_FLEET_TLS.
        Without them the scheduler must be on loopback."""
        self.tls = fleet_tls.tls_dir(tls)
        self.scheduler = fleet_tls.scheduler_address(scheduler, self.tls)
        if self.tls is not None:
            self.security: Any = fleet_tls.security(self.tls)  # its files checked, now
        super().__init__(lab, results_root, progress, notify, resume, history)
        self.wait_for_workers_s = wait_for_workers_s
        self.hosts: dict[str, HostEntry] = {}
        self._timeline: list[FleetUnit] = list(self.writer.record.get("fleet_units", []))

    def _resume_command(self) -> str:
        tls = f" --tls {self.tls}" if self.tls is not None else ""
        return f"dbregress run --resume {self.path} --scheduler {self.scheduler}{tls}"

    def counts(self) -> bool:
        """Whether the run has a cost lane: as a local run decides, but from the
        workers' valgrind rather than this machine's."""
        if self.lab.count is False:
            return False
        if self.lab.count is None and os.environ.get("DBREGRESS_COUNT", "1").strip() in (
            "0",
            "false",
            "no",
            "off",
        ):
            return False
        return self.lab.count is True or any(h.get("valgrind") for h in self.hosts.values())

    def run_lane(self, notify: Callable[[str], None]) -> None:
        """The cost lane of the run, its replays spread over the fleet (fleet/lane.py)."""
        client = self._connect()
        try:
            if not self.hosts:
                self._learn_hosts(client)
            identity = self._count_identity(notify)
            FleetLane(self.path, self.lab, notify, client, self._usable(), identity).run_lane()
        finally:
            client.close()

    def _count_identity(self, notify: Callable[[str], None]) -> CountIdentity:
        """The measurement identity of the lab's replays (host.py): the one a resumed run's
        replays were counted with, else the coordinator's own if it could count, else the
        most workers'. Stored in run.json (`count_identity`)."""
        own: ChosenIdentity | None = self.writer.record.get("count_identity")
        if own is None:
            mine: CountingHost = {
                **measurement_identity(),
                "valgrind": bool(shutil.which("valgrind") and shutil.which("vgdb")),
            }
            if can_count(mine):
                own = {**measurement_identity(), "chosen_by": "the coordinator's own"}
        identity = count_identity(own, self._usable())
        shown = ", ".join(f"{k} {shown_value(k, identity[k])}" for k in COUNT_IDENTITY)
        notify(
            f"fleet: counting replays on {', '.join(identity['hosts'])}: measurement identity "
            f"{identity['chosen_by']} ({shown})"
        )
        for name, fields in identity["left_out"].items():
            notify(f"fleet: host {name} counts no replay of this run (not the lab's {fields})")
        self.writer.set_record("count_identity", identity)
        return identity

    def _connect(self) -> Any:
        from distributed import Client

        security = None
        if self.tls is not None:
            fleet_tls.probe(self.scheduler, self.tls)
            security = self.security
        try:
            client = Client(  # type: ignore[no-untyped-call]
                self.scheduler, timeout=30, set_as_default=False, security=security
            )
        except OSError as e:
            hint = (
                ""
                if self.tls is not None
                else "; a scheduler started with --tls refuses a coordinator without it"
            )
            raise LabError(
                f"cannot reach the Dask scheduler at {self.scheduler} ({e}); start one "
                f"with `dbregress scheduler` (docs/fleet.md){hint}"
            ) from None
        try:
            client.wait_for_workers(1, timeout=self.wait_for_workers_s)
        except TimeoutError:
            client.close()  # type: ignore[no-untyped-call]
            raise LabError(
                f"no worker joined the scheduler at {self.scheduler} within "
                f"{self.wait_for_workers_s:g} s; start one with `dbregress worker --scheduler "
                f"{self.scheduler}`"
            ) from None
        return client

    def _run_all(self) -> None:
        client = self._connect()
        messages: queue.Queue[Message] = queue.Queue()
        topic = f"dbregress/{self.path.name}"
        client.subscribe_topic(topic, lambda event: messages.put(event[1]))
        jobs = {j.name: j for j in self._all_jobs()}
        receiver = Receiver(self.writer, jobs, self._index_received, self.notify)
        units = Units(self.lab, self.writer, self.notify, client, topic, self._timeline)
        plans: list[Plan] = []
        try:
            self._learn_hosts(client)
            plans = self._plan()
            self._same_methods(plans)
            dashboard = client.dashboard_link if _has_dashboard(client) else "none"
            self.notify(
                f"fleet: {len(self.hosts)} worker(s) at {self.scheduler}; dashboard {dashboard}"
            )
            for plan in plans:
                units.start_comparison(plan)
            units.loop(plans, messages, receiver)
        except BaseException:
            with shielded():
                for plan in plans:
                    for future in plan.running.values():
                        future.cancel()
            raise
        finally:
            with shielded():
                _drain(messages, receiver)
                client.close()

    def _all_jobs(self) -> list[Job]:
        out = []
        for comp in self.lab.comparisons:
            out += self.lab.warmup_jobs(comp)
            for number in range(1, self.lab.repeats.maximum + 1):
                out += self.lab.round(comp, number)
        return out

    def _learn_hosts(self, client: Any) -> None:
        found: dict[str, Fingerprint | None] = client.run(worker_fingerprint)
        hosts: dict[str, HostEntry] = {}
        for address, fp in found.items():
            if fp is None:
                self.notify(f"fleet: {address} is not a `dbregress worker`: not used")
                continue
            # a fingerprint has no left_out: only the coordinator leaves a host out
            hosts[fp["name"]] = cast(HostEntry, {**fp, "address": address})
        if not hosts:
            raise LabError(
                f"no `dbregress worker` among the workers of {self.scheduler}; start one "
                "on each benchmark host (docs/fleet.md)"
            )
        for name, why in noisy_hosts(hosts).items():
            self.notify(f"fleet: host {name}: {why}")
            hosts[name]["left_out"] = why
        self.hosts = hosts
        self.writer.set_record("hosts", hosts)

    def _usable(self) -> dict[str, HostEntry]:
        return {n: fp for n, fp in self.hosts.items() if "left_out" not in fp}

    def _plan(self) -> list[Plan]:
        """Hosts per comparison: one host each (jobs schedule), one group each
        (interleaved), spread over the fleet."""
        usable = self._usable()
        if not usable:
            raise LabError("every host of the fleet was left out as noisy: nothing to run on")
        groups: dict[str, list[str]] = {}
        for name in sorted(usable):
            groups.setdefault(usable[name]["group"], []).append(name)
        for group, members in groups.items():
            if differ := unlike(usable, members):
                self.notify(f"fleet: group {group}: its hosts differ in {', '.join(differ)}")
        by_size = sorted(groups.values(), key=len, reverse=True)
        next_host = itertools.cycle(sorted(usable))
        next_group = itertools.cycle(by_size)
        plans = []
        for comp in self.lab.comparisons:
            if self.lab.schedule == "interleaved":
                group = usable[next(next_group)[0]]["group"]
                cpus = min(int(usable[h]["cpu_count"] or 1) for h in groups[group])
                plans.append(Plan(comp, groups[group], group_resource(group), cpus))
            else:
                host = next(next_host)
                cpus = int(usable[host]["cpu_count"] or 1)
                plans.append(Plan(comp, [host], host_resource(host), cpus))
            hosts = plans[-1].hosts
            self.notify(f"fleet: {comp.name} runs on {', '.join(hosts)}")
        self.writer.set_record("fleet_plan", {p.comparison.name: p.hosts for p in plans})
        return plans

    def _same_methods(self, plans: list[Plan]) -> None:
        """A resumed run goes on only where its hosts measure as its finished jobs were
        measured (their workers' method identities): else refused in one line."""
        for plan in plans:
            hosts = {h: self.hosts[h] for h in plan.hosts}
            why = methods_unlike(self.writer.record["jobs"], hosts, plan.comparison.name)
            if why:
                raise LabError(
                    f"cannot resume {self.path}: {why}; a comparison's figures come from one "
                    f"method: run its lab again as a new run, or resume with workers as they were"
                )

    def _index_received(self, result: StepResult, index: int) -> None:
        self._index(functools.partial(self._index_step, result, index))


class Units:
    """A run's units on the fleet: submitted round by round to the hosts of their
    comparison's plan, followed as they run, and more rounds added while steps are
    undecided, as a local run adds them."""

    def __init__(
        self,
        lab: Lab,
        writer: RunWriter,
        notify: Callable[[str], None],
        client: Any,
        topic: str,
        timeline: list[FleetUnit],
    ) -> None:
        self.lab, self.writer, self.notify = lab, writer, notify
        self.client, self.topic = client, topic
        self.timeline = timeline  # run.json `fleet_units`, grown as units end
        self._submitted_at: dict[str, float] = {}
        self._submitted_wall: dict[str, float] = {}

    def start_comparison(self, plan: Plan) -> None:
        if self.lab.warmup_jobs(plan.comparison):
            self._submit(plan, 0)
        for _ in range(self.lab.repeats.minimum):
            self._next_round(plan)

    def _next_round(self, plan: Plan) -> None:
        plan.submitted += 1
        number = plan.submitted
        comp = plan.comparison
        if not self.writer.has_round(comp.name, number):  # else a resumed run's
            order = [j.column.label for j in self.lab.round(comp, number)]
            self.writer.add_round(comp.name, number, order)
        self._submit(plan, number)

    def _submit(self, plan: Plan, number: int) -> None:
        comp = plan.comparison
        unit = unit_name(comp.name, number)
        jobs = unit_jobs(self.lab, comp.name, number)
        if all(self.writer.job_finished(j) for j in jobs):  # a resumed run keeps it
            plan.finished.add(number)
            return
        run = self.writer.path.name
        payload: UnitRequest = {
            "topic": self.topic,
            "run": run,
            "unit": unit,
            "comparison": comp.name,
            "number": number,
            "lab_file": self.lab.path.name,
            "lab_text": self.lab.text,
            "record": cast(RunJson, {k: v for k, v in self.writer.record.items() if k != "hosts"}),
        }
        # Earlier units first on a host: the warm-up, then rounds in order.
        priority = 10**6 if number == 0 else -number
        plan.running[unit] = self.client.submit(
            run_unit,
            payload,
            key=f"{run}/{unit}",
            pure=False,
            resources={RESOURCE: 1, CPUS: plan.cpus, plan.resource: 1},
            priority=priority,
        )
        self._submitted_at[unit] = time.monotonic()
        self._submitted_wall[unit] = time.time()

    def loop(self, plans: list[Plan], messages: queue.Queue[Message], receiver: Receiver) -> None:
        last_status = time.monotonic()
        while any(p.running for p in plans):
            # Every message that has come, then every unit that has ended, then a short
            # wait for the next message.
            with contextlib.suppress(queue.Empty):
                msg = messages.get(timeout=0.05)
                until = time.monotonic() + 0.2  # then look at the units, backlog or not
                while True:
                    self._tell(msg)
                    receiver.apply(msg)
                    if time.monotonic() > until:
                        break
                    msg = messages.get_nowait()
            for plan in plans:
                for unit, future in list(plan.running.items()):
                    if future.done():
                        del plan.running[unit]
                        self._unit_done(plan, unit, future, receiver)
                if not plan.running and not plan.stopped:
                    self._more_rounds(plan)
            if time.monotonic() - last_status > STATUS_EVERY_S:
                last_status = time.monotonic()
                self._status(plans, receiver)

    def _tell(self, msg: Message) -> None:
        if msg["kind"] == "start":
            self.notify(f"{msg['host']}: {msg['unit']} started ({', '.join(msg['jobs'])})")

    def _unit_done(self, plan: Plan, unit: str, future: Pending, receiver: Receiver) -> None:
        number = 0 if unit.endswith("/warm-up") else int(unit.rsplit(" ", 1)[1])
        try:
            outcome = future.result()
        except Exception as e:  # the unit's task failed (or its workers kept dying)
            where = f"{unit} on the fleet"
            self.writer.add_failure(where, e)
            self.notify(f"{unit}: failed: {type(e).__name__}: {e}")
            plan.finished.add(number)
            return
        receiver.finish(outcome)
        plan.finished.add(number)
        took = time.monotonic() - self._submitted_at.get(unit, time.monotonic())
        self.notify(f"{outcome['host']}: {unit} finished ({took:.0f} s)")
        # The unit's timeline (wall clocks of the coordinator and the worker): what the
        # fleet cost beyond the unit's own time (bench/fleet_overhead.py).
        self.timeline.append(
            {
                "unit": unit,
                "host": outcome["host"],
                "submitted": self._submitted_wall.get(unit),
                "started": outcome.get("started"),
                "ended": outcome.get("ended"),
                "received": time.time(),
            }
        )
        self.writer.record["fleet_store"] = {
            "messages": receiver.messages,
            "busy_s": round(receiver.busy_s, 3),
        }
        self.writer.set_record("fleet_units", self.timeline)  # saves both

    def _more_rounds(self, plan: Plan) -> None:
        """After the rounds submitted so far ended: more while a step is undecided and
        within reach, as a local run adds them (runner.py)."""
        at_once = len(plan.hosts) if self.lab.schedule == "interleaved" else 1
        run = self.writer.path
        follows = rounds.after(self.lab, plan.comparison, plan.submitted, run, at_once)
        if follows.message:
            self.notify(follows.message)
        if not follows.rounds or plan.submitted < self.lab.repeats.minimum:
            plan.stopped = True
            return
        for _ in range(follows.rounds):
            self._next_round(plan)

    def _status(self, plans: list[Plan], receiver: Receiver) -> None:
        """Every host's unit, and what is left (rounds beyond the minimum may be added)."""
        running = [
            f"{receiver.host.get(u, 'waiting for a host')}: {u}" for p in plans for u in p.running
        ]
        done = sum(len(p.finished) for p in plans)
        planned = sum(
            max(p.submitted, self.lab.repeats.minimum)
            + (1 if self.lab.warmup_jobs(p.comparison) else 0)
            for p in plans
        )
        more = (
            f" (rounds may be added up to {self.lab.repeats.maximum} per comparison)"
            if self.lab.repeats.maximum > self.lab.repeats.minimum
            else ""
        )
        self.notify(
            f"fleet: {done}/{planned} unit(s) done{more}; "
            f"{'; '.join(running) or 'none under way'}; {receiver.steps_received} step(s) received"
        )


def _drain(messages: queue.Queue[Message], receiver: Receiver) -> None:
    while True:
        try:
            receiver.apply(messages.get_nowait())
        except queue.Empty:
            return


def _has_dashboard(client: Any) -> bool:
    try:
        return bool(client.scheduler_info().get("services", {}).get("dashboard"))
    except Exception:
        return False
