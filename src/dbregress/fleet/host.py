"""Hosts as part of the experiment: what each worker says of its machine, which hosts may
be compared, and which are too noisy to use.

Two hosts are *identical* when their CPU model, core count, memory, architecture, kernel
release, frequency governor and virtualization agree; identical hosts form a group unless
their workers were given a group name (`dbregress worker --group NAME`), which then is
the group. A comparison's time-lane figures come from one host (the jobs schedule), or
from one group (the interleaved schedule, whose every round runs whole on one host, so
each round's paired ratio is within a host and the host is a blocking factor like the
round itself). Counts do not depend on the host's hardware, but they do depend on the software that
counts: the loadgen binary (its own instructions are part of no count, but its requests
are), valgrind (its simulated caches and its instrumentation), the C library (its
memcpy, malloc and friends run inside the engine) and the processor valgrind presents
(glibc and RocksDB pick code paths by CPUID: method.cpu_features). A comparison's counting replays
therefore all run on workers of one *measurement identity* (`COUNT_IDENTITY`): the
coordinator's own when it could count itself (valgrind and a built loadgen there), else
the identity shared by the most workers with valgrind; workers of another identity get
no replay, and a fleet with no worker of that identity is refused.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import statistics
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from dbregress.collect.host import host_facts, read_text
from dbregress.method import identity as method
from dbregress.model.errors import LabError
from dbregress.shapes.host import (
    ChosenIdentity,
    CountIdentity,
    CountingHost,
    Fingerprint,
    IdentityField,
    MeasurementIdentity,
    WorkerFacts,
)
from dbregress.shapes.run import JobEntry
from dbregress.store.calibration import load_calibration
from dbregress.store.run import ENDED

# A host whose calibrated noise (median coefficient of variation of its steadiest
# placement) is above this many times the median of the rest of its group is left out.
NOISY_FACTOR = 2.0
IDENTITY = ("cpu_model", "cpu_count", "mem_gib", "machine", "kernel_release", "governor", "virt")
# What a count depends on besides the build and the lab: replays of one comparison all
# run where these agree.
COUNT_IDENTITY: tuple[IdentityField, ...] = (
    "dbregress",
    "loadgen_sha256",
    "valgrind_version",
    "libc",
    "cpu_features",
)


@functools.cache
def measurement_identity() -> MeasurementIdentity:
    """This host's measurement identity (COUNT_IDENTITY's fields), from the method
    identity every run and counting replay records (dbregress/method/identity.py)."""
    mine = method.identity()
    return {
        "dbregress": mine["dbregress"],
        "loadgen_sha256": mine["loadgen_sha256"],
        "valgrind_version": mine["valgrind"],
        "libc": mine["libc"],
        "cpu_features": mine.get("cpu_features"),
    }


def identity_of(fp: MeasurementIdentity) -> MeasurementIdentity:
    """The measurement identity's fields of a fingerprint or identity, alone and in
    their order (None where one lacks a field)."""
    return {
        "dbregress": fp.get("dbregress"),
        "loadgen_sha256": fp.get("loadgen_sha256"),
        "valgrind_version": fp.get("valgrind_version"),
        "libc": fp.get("libc"),
        "cpu_features": fp.get("cpu_features"),
    }


def identity_key(fp: MeasurementIdentity) -> str:
    """A short name of a measurement identity (a Dask resource of its workers)."""
    key = "|".join(str(fp.get(k)) for k in COUNT_IDENTITY)
    return hashlib.sha256(key.encode()).hexdigest()[:12]


# A method identity's fields (dbregress/method/identity.py) as a worker's fingerprint names them:
# what a host's time-lane figures depend on besides its machine.
METHOD_FIELDS = {
    "dbregress": "dbregress",
    "loadgen_sha256": "loadgen_sha256",
    "valgrind": "valgrind_version",
    "libc": "libc",
    "cpu_features": "cpu_features",
}


def methods_unlike(
    jobs: Mapping[str, JobEntry], hosts: Mapping[str, Fingerprint], comparison: str
) -> str | None:
    """Why a resumed run's comparison cannot go on on `hosts`: the jobs it finished
    were measured by a method (run.json `jobs`, each entry's method_identity) that one of
    them does not measure by (a worker upgraded between the attempts), in words; None
    when every host measures as they did. A comparison's figures come from one method."""
    for name, entry in jobs.items():
        done = entry.get("method_identity")
        if entry.get("comparison") != comparison or entry.get("status") not in ENDED or not done:
            continue
        for host, fp in sorted(hosts.items()):
            differ = [
                f"{field} {shown_value(key, done.get(field))} -> {shown_value(key, fp.get(key))}"
                for field, key in METHOD_FIELDS.items()
                if done.get(field) != fp.get(key)
            ]
            if differ:
                what = "; ".join(differ)
                return f"job {name} was measured by another method than {host}'s ({what})"
    return None


def can_count(fp: CountingHost) -> bool:
    return bool(fp.get("valgrind")) and fp.get("loadgen_sha256") is not None


def shown_value(field: str, value: object) -> str:
    """An identity field as messages show it (a loadgen hash cut to 12 digits)."""
    if field == "loadgen_sha256" and isinstance(value, str):
        return value[:12]
    return str(value)


def count_identity(own: ChosenIdentity | None, hosts: Mapping[str, Fingerprint]) -> CountIdentity:
    """The measurement identity of a lab's counting replays and the workers that have it.

    `own`: the coordinator's identity if it could count itself (it is then the one), or
    a stored one (a resumed run keeps the identity its first replays were counted with);
    else the identity shared by the most workers that can count (valgrind and a loadgen),
    a tie refused. Refused when no worker that can count has it, naming the fields in
    which they differ from it."""
    counters = {n: fp for n, fp in sorted(hosts.items()) if can_count(fp)}
    if not counters:
        raise LabError(
            "the cost lane needs valgrind and a built loadgen on a worker, and no worker of "
            "the fleet has both: run `make setup` on the benchmark hosts, or set count = false"
        )
    if own is not None:
        wanted = identity_of(own)
        chosen_by = str(own.get("chosen_by") or "the coordinator's own")
    else:
        wanted = identity_of(counters[_most_workers(counters)])
        chosen_by = "the most workers'"
    members = [
        n for n, fp in counters.items() if all(fp.get(k) == wanted[k] for k in COUNT_IDENTITY)
    ]
    if not members:
        raise _none_counts_as(chosen_by, wanted, counters)
    others = {
        n: [k for k in COUNT_IDENTITY if fp.get(k) != wanted[k]]
        for n, fp in counters.items()
        if n not in members
    }
    return {
        **wanted,
        "key": identity_key(wanted),
        "chosen_by": chosen_by,
        "hosts": members,
        "left_out": {n: ", ".join(ks) for n, ks in others.items()},
    }


def _most_workers(counters: dict[str, Fingerprint]) -> str:
    """A worker of the identity shared by the most of the workers that can count; a
    tie between two identities is refused, naming the fields in which they differ."""
    by_key: dict[str, list[str]] = {}
    for name, fp in counters.items():
        by_key.setdefault(identity_key(fp), []).append(name)
    ranked = sorted(by_key.values(), key=len, reverse=True)
    if len(ranked) > 1 and len(ranked[0]) == len(ranked[1]):
        a, b = counters[ranked[0][0]], counters[ranked[1][0]]
        differ = [k for k in COUNT_IDENTITY if a.get(k) != b.get(k)]
        what = "; ".join(
            f"{k}: {', '.join(f'{n} {shown_value(k, counters[n].get(k))}' for n in counters)}"
            for k in differ
        )
        raise LabError(
            f"the fleet's workers do not agree on what counts, and as many have one "
            f"identity as another ({what}): counts of one comparison must come from one "
            "identity; make the hosts alike (same dbregress, loadgen, valgrind, libc and "
            "processor as valgrind presents it) or "
            "run the coordinator on a host that can count (its identity is then the lab's)"
        )
    return ranked[0][0]


def _none_counts_as(
    chosen_by: str, wanted: MeasurementIdentity, counters: dict[str, Fingerprint]
) -> LabError:
    """The refusal of a fleet with no worker of the wanted identity, naming the fields in
    which its workers differ from it."""
    what = "; ".join(
        f"{k}: wanted {shown_value(k, wanted[k])}, "
        + ", ".join(f"{n} {shown_value(k, fp.get(k))}" for n, fp in counters.items())
        for k in COUNT_IDENTITY
        if any(fp.get(k) != wanted[k] for fp in counters.values())
    )
    return LabError(
        f"no worker of the fleet counts as {chosen_by} identity does ({what}): counts of "
        "one comparison must come from one identity; install the same dbregress, loadgen "
        "build, valgrind and libc on benchmark hosts whose processor valgrind presents alike "
        "(cpu_features)"
    )


def virtualization() -> str:
    """`none`, the hypervisor systemd names (kvm, xen, ...), or `vm` when only the CPU's
    hypervisor flag says so."""
    tool = shutil.which("systemd-detect-virt")
    if tool:
        try:
            out = subprocess.run([tool], capture_output=True, text=True, timeout=10)
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    flags = next(
        (
            line
            for line in (read_text("/proc/cpuinfo") or "").splitlines()
            if line.startswith("flags")
        ),
        "",
    )
    return "vm" if " hypervisor" in flags else "none"


def fingerprint(name: str, group: str | None, results_root: Path | None) -> Fingerprint:
    """What a worker tells the coordinator about its host."""
    facts = host_facts()
    mem = facts.get("mem_total_bytes")
    kernel = str(facts.get("kernel", ""))
    ident = measurement_identity()
    out: WorkerFacts = {
        "name": name,
        "hostname": cast(str, facts["hostname"]),
        "dbregress": ident["dbregress"],
        "cpu_model": cast("str | None", facts["cpu_model"]),
        "cpu_count": cast("int | None", facts["cpu_count"]),
        "mem_gib": round(mem / 2**30) if isinstance(mem, int) else None,
        "machine": cast(str, facts["machine"]),
        "kernel_release": kernel.split(" ")[1] if " " in kernel else kernel,
        "governor": cast("str | None", facts.get("cpu_governor")),
        "virt": virtualization(),
        "valgrind": bool(shutil.which("valgrind") and shutil.which("vgdb")),  # the cost lane
        "loadgen_sha256": ident["loadgen_sha256"],
        "valgrind_version": ident["valgrind_version"],
        "libc": ident["libc"],
        "cpu_features": ident["cpu_features"],
        "calibration": None,
        # exact: the worker sizes a counting replay's engine from it (the count store's key)
        "mem_total_bytes": mem if isinstance(mem, int) else None,
    }
    cal = load_calibration(results_root, str(facts["hostname"])) if results_root else None
    if cal is not None:
        steadiest = cal.get("steadiest")
        placements = cal.get("placements") or {}
        chosen = placements.get(steadiest) if steadiest else None
        cv = chosen.get("median_cv") if chosen else None
        out["calibration"] = {
            "measured_at": cal.get("measured_at"),
            "placement": steadiest,
            "median_cv": cv,
        }
    return {**out, "group": group or identity_group(out), "count_key": identity_key(out)}


def identity_group(fp: WorkerFacts) -> str:
    """A name for the group of hosts identical to `fp`."""
    key = "|".join(str(fp.get(k)) for k in IDENTITY)
    return "same-" + hashlib.sha256(key.encode()).hexdigest()[:8]


def noise(fp: WorkerFacts) -> float | None:
    cal = fp.get("calibration")
    cv = cal.get("median_cv") if cal else None
    return float(cv) if isinstance(cv, (int, float)) else None


def noisy_hosts(hosts: Mapping[str, Fingerprint]) -> dict[str, str]:
    """name -> why, for each host whose calibrated noise is far above its group's."""
    out: dict[str, str] = {}
    groups: dict[str, list[str]] = {}
    for name, fp in hosts.items():
        groups.setdefault(fp["group"], []).append(name)
    for members in groups.values():
        measured = {n: cv for n in members if (cv := noise(hosts[n])) is not None}
        for name, cv in measured.items():
            rest = [v for n, v in measured.items() if n != name]
            if not rest:
                continue
            typical = statistics.median(rest)
            if typical > 0 and cv > NOISY_FACTOR * typical:
                out[name] = (
                    f"calibrated noise {cv:.1%}, over {NOISY_FACTOR:g}x its group's "
                    f"{typical:.1%}: left out (run `dbregress calibrate` there again once "
                    "it is quiet)"
                )
    return out


def unlike(hosts: Mapping[str, Fingerprint], members: list[str]) -> list[str]:
    """The identity fields on which members of one named group differ."""
    return [k for k in IDENTITY if len({str(hosts[m].get(k)) for m in members}) > 1]
