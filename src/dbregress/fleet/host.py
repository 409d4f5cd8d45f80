"""Hosts as part of the experiment: what each worker says of its machine, which hosts may
be compared, and which are too noisy to use.

Two hosts are *identical* when their CPU model, core count, memory, architecture, kernel
release, frequency governor and virtualization agree; identical hosts form a group unless
their workers were given a group name (`dbregress worker --group NAME`), which then is
the group. A comparison's time-lane figures come from one host (the jobs schedule), or
from one group (the interleaved schedule, whose every round runs whole on one host, so
each round's paired ratio is within a host and the host is a blocking factor like the
round itself). Counts do not depend on the host, so they may come from any.
"""

from __future__ import annotations

import hashlib
import shutil
import statistics
import subprocess
from pathlib import Path
from typing import Any

from dbregress import __version__
from dbregress.collect.host import host_facts, read_text
from dbregress.store.calibration import load_calibration

# A host whose calibrated noise (median coefficient of variation of its steadiest
# placement) is above this many times the median of the rest of its group is left out.
NOISY_FACTOR = 2.0
IDENTITY = ("cpu_model", "cpu_count", "mem_gib", "machine", "kernel_release", "governor", "virt")


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


def fingerprint(name: str, group: str | None, results_root: Path | None) -> dict[str, Any]:
    """What a worker tells the coordinator about its host."""
    facts = host_facts()
    mem = facts.get("mem_total_bytes")
    kernel = str(facts.get("kernel", ""))
    out: dict[str, Any] = {
        "name": name,
        "hostname": facts["hostname"],
        "dbregress": __version__,
        "cpu_model": facts["cpu_model"],
        "cpu_count": facts["cpu_count"],
        "mem_gib": round(mem / 2**30) if isinstance(mem, int) else None,
        "machine": facts["machine"],
        "kernel_release": kernel.split(" ")[1] if " " in kernel else kernel,
        "governor": facts.get("cpu_governor"),
        "virt": virtualization(),
        "valgrind": bool(shutil.which("valgrind") and shutil.which("vgdb")),  # the cost lane
        "calibration": None,
    }
    cal = load_calibration(results_root, str(facts["hostname"])) if results_root else None
    if cal is not None:
        steadiest = cal.get("steadiest")
        placements = cal.get("placements") or {}
        cv = (placements.get(steadiest) or {}).get("median_cv") if steadiest else None
        out["calibration"] = {
            "measured_at": cal.get("measured_at"),
            "placement": steadiest,
            "median_cv": cv,
        }
    out["group"] = group or identity_group(out)
    return out


def identity_group(fp: dict[str, Any]) -> str:
    """A name for the group of hosts identical to `fp`."""
    key = "|".join(str(fp.get(k)) for k in IDENTITY)
    return "same-" + hashlib.sha256(key.encode()).hexdigest()[:8]


def noise(fp: dict[str, Any]) -> float | None:
    cal = fp.get("calibration") or {}
    cv = cal.get("median_cv")
    return float(cv) if isinstance(cv, (int, float)) else None


def noisy_hosts(hosts: dict[str, dict[str, Any]]) -> dict[str, str]:
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


def unlike(hosts: dict[str, dict[str, Any]], members: list[str]) -> list[str]:
    """The identity fields on which members of one named group differ."""
    return [k for k in IDENTITY if len({str(hosts[m].get(k)) for m in members}) > 1]
