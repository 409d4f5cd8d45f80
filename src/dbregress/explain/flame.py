"""Flame graphs from `perf record` samples, through the `inferno` tools (`make tools`
installs them with cargo): perf script's stacks are folded by inferno-collapse-perf,
scaled here to CPU nanoseconds per operation of the step's Q, drawn by
inferno-flamegraph; inferno-diff-folded compares a column's folded stacks with the
base's (red: more CPU per operation than the base, blue: less)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from dbregress.model.errors import DbregressError

TOOLS = ("inferno-collapse-perf", "inferno-flamegraph", "inferno-diff-folded")


class FlameError(DbregressError):
    """perf or an inferno tool is missing or failed."""


def missing_tools() -> list[str]:
    """The tools this machine lacks (perf and inferno's); empty when flame graphs work."""
    return [t for t in ("perf", *TOOLS) if shutil.which(t) is None]


def perf_can_sample() -> str | None:
    """None if `perf record -e cpu-clock` works here, else why not."""
    if shutil.which("perf") is None:
        return "perf is not installed (Debian: linux-perf)"
    try:
        out = subprocess.run(
            ["perf", "record", "-q", "-e", "cpu-clock", "-o", "/dev/null", "--", "true"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"perf record failed: {e}"
    if out.returncode != 0:
        return f"perf record -e cpu-clock failed: {out.stderr.strip()[-200:]}"
    return None


def _run(args: list[str], stdin: bytes | None = None) -> bytes:
    try:
        out = subprocess.run(args, input=stdin, capture_output=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise FlameError(f"{args[0]} failed: {e}") from e
    if out.returncode != 0:
        err = out.stderr.decode(errors="replace").strip()[-300:]
        raise FlameError(f"{args[0]} exited with {out.returncode}: {err}")
    return out.stdout


def collapse(data: Path) -> str:
    """perf.data -> folded stacks ("frame;frame;frame count" lines)."""
    if not data.exists():
        raise FlameError(f"perf recorded nothing ({data} is missing)")
    # --no-inline: resolving inlined frames runs addr2line per frame (slow on big libraries)
    script = _run(["perf", "script", "--no-inline", "-i", str(data)])
    return _run(["inferno-collapse-perf"], script).decode(errors="replace")


def parse_folded(text: str) -> list[tuple[str, float]]:
    out = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count:
            try:
                out.append((stack, float(count)))
            except ValueError:
                continue
    return out


def per_op(folded: str, count: float) -> str:
    """Folded CPU time -> CPU nanoseconds per operation. inferno-collapse-perf weighs
    each cpu-clock sample by its period, which perf gives in nanoseconds, so the folded
    counts are nanoseconds of CPU already. Stacks under 1 ns per operation are dropped."""
    if count <= 0:
        return ""
    lines = []
    for stack, ns in parse_folded(folded):
        per = round(ns / count)
        if per > 0:
            lines.append(f"{stack} {per}")
    return "\n".join(lines) + ("\n" if lines else "")


def flamegraph(folded: str, title: str, svg: Path) -> None:
    args = ["inferno-flamegraph", "--title", title, "--countname", "ns/op"]
    svg.parent.mkdir(parents=True, exist_ok=True)
    svg.write_bytes(_run(args, folded.encode()))


def differential(base: Path, other: Path, title: str, svg: Path) -> None:
    """The column's stacks, coloured by their change from the base's (per operation:
    both folded files are already in ns per operation, so no normalising)."""
    diff = _run(["inferno-diff-folded", str(base), str(other)])
    flamegraph(diff.decode(errors="replace"), title, svg)
