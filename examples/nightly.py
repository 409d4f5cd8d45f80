#!/usr/bin/env python3
"""The nightly job for an engine's source tree, end to end (docs/nightly.md).

    python3 examples/nightly.py --tree ~/postgres --base REL_17_2 [--results results] ...

One night: resolve the tree's HEAD to a commit, build it (`dbregress fetch`), run a lab
whose base column is the last good night's commit (or --base) and whose head column is
tonight's commit, in both lanes (`dbregress run`), gate the run with the fail-closed
gate (`dbregress report --fail-on`), check the run is in the history, write the site
(`dbregress site`), and on a confirmed regression bisect the commits since the last good
night on the step the gate named (`dbregress bisect --src`), then write the site again.

With --drift P%, the night also asks `dbregress ledger` for every step's cumulative cost
change since a fixed reference (the first night's run, or --reference RUN; kept in the
state file beside the last good night) and fails when one is above P%.

Exit status: 0 green (or nothing new since the last good night); 1 a confirmed
regression (after the bisection), or a drift beyond --drift; 2 not judged (a step
undecided, the run did not finish, the drift not judged, another night still running);
3 the recipe itself failed (a build, a git command, a missing base, a full disk or an
unwritable results folder, a bug of its own). Every step's output goes to
RESULTS/nightly/NIGHT/STEP.log, and RESULTS/nightly/state.json keeps the last good
night, the drift's reference and every night's outcome.
Only the standard library: copy it and change what you need.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import os
import shlex
import signal
import string
import subprocess
import sys
import time
import tomllib
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

GREEN, REGRESSION, NOT_JUDGED, FAILED = 0, 1, 2, 3
OUTCOMES = {GREEN: "green", REGRESSION: "regression", NOT_JUDGED: "not judged", FAILED: "failed"}
ENGINES = ("postgres", "mariadb", "mysql", "rocksdb")
FAMILY = {"postgres": "postgres", "mariadb": "mysql", "mysql": "mysql", "rocksdb": "rocksdb"}

# The built-in labs: small, so that a night takes minutes on two CPUs; interleaved, so
# that the host's drift lands on both columns alike (docs/verdicts.md). ${NAME},
# ${BASE_BUILD} and ${HEAD_BUILD} are filled in each night; a --lab template uses the same.
HEADER = """\
# tonight's lab, written by the nightly recipe: base = ${BASE_NOTE}
name = "${NAME}"
schedule = "interleaved"
repeats = "4..12"
count = true
count_replays = 2
[[column]]
label = "base"
build = "${BASE_BUILD}"
[[column]]
label = "head"
build = "${HEAD_BUILD}"
"""
INSERT_LAB = (
    HEADER.replace("count = true", 'benchmark = "insert"\ncount = true')
    + """\
[insert]
load_rows = 20000
write_rows = 4000
query_seconds = 2
warmup_s = 0.5
steps = ["l.i0", "l.x", "qr100", "qp100"]
"""
)
KV_LAB = (
    HEADER.replace("count = true", 'benchmark = "kv"\ncount = true')
    + """\
[kv]
keys = 50000
seconds = 2
short_seconds = 2
warmup_s = 0.5
steps = ["fillseq", "revrange", "readrandom"]
"""
)


class RecipeError(Exception):
    """The recipe cannot go on (exit 3); the message says what to fix."""


class Stopped(Exception):
    """SIGTERM or SIGINT: the night ends, with what it has on disk."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[2])
    # fmt: off
    ap.add_argument("--tree", type=Path, required=True, help="the engine's git checkout")
    ap.add_argument("--ref", default="HEAD", help="what to build tonight (default HEAD)")
    ap.add_argument("--engine", choices=ENGINES, default="postgres")
    ap.add_argument("--flavor", default="rel", help="compile flavor of both columns")
    ap.add_argument("--base", help="the base before the first good night: a ref of the tree "
                    "(the last release's tag, built like HEAD) or a build (postgres@17.2.0)")
    ap.add_argument("--against", choices=("last-good", "base"), default="last-good",
                    help="the base column: the last good night's commit (default) or --base")
    ap.add_argument("--lab", type=Path, help="a lab template (${BASE_BUILD}, ${HEAD_BUILD})")
    ap.add_argument("--name", help="the lab's name in the history (default nightly-ENGINE)")
    ap.add_argument("--results", type=Path, default=Path("results"))
    ap.add_argument("--site-out", type=Path, help="the site's folder (default RESULTS/site)")
    ap.add_argument("--gate", choices=("slower", "slower:time", "slower:cost"), default="slower")
    ap.add_argument("--accept-ungated", action="store_true",
                    help="a green night whose lane the gate does not judge confirmed a step "
                    "slower still becomes the last good night (default: it does not)")
    ap.add_argument("--reference", metavar="RUN",
                    help="the drift's fixed reference: a run id whose base column it is "
                    "(default: the first night's run, i.e. the first night's base)")
    ap.add_argument("--drift", type=percent, metavar="P%",
                    help="exit 1 when a step's cumulative cost change since the reference "
                    "is above P%% (its interval all above), e.g. 2%%")
    ap.add_argument("--bisect-steps", type=int, default=1,
                    help="how many of the steps the gate named to bisect (0: none)")
    ap.add_argument("--dbregress", default="dbregress", help="how to call dbregress")
    ap.add_argument("--force", action="store_true", help="run even if HEAD is the last good")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    # fmt: on
    args = ap.parse_args(argv)
    args.tree = args.tree.expanduser().resolve()
    args.results = args.results.expanduser().resolve()
    args.name = args.name or f"nightly-{args.engine}"
    args.site_out = (args.site_out or args.results / "site").expanduser().resolve()
    if args.against == "base" and not args.base:
        ap.error("--against base needs --base")
    return args


def percent(text: str) -> float:
    """--drift's limit: "2%" or "2" is 0.02."""
    try:
        value = float(text.strip().removesuffix("%")) / 100
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (2%)") from None
    if not 0 < value < 10:
        raise argparse.ArgumentTypeError(f"{text!r}: give a percentage above 0, e.g. 2%")
    return value


def source_build(engine: str, tree: Path, commit: str, flavor: str) -> str:
    return f"{engine}@src:{tree}#{commit}+{flavor}"


def git(tree: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True)
    if done.returncode != 0:
        msg = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise RecipeError(f"git -C {tree} {' '.join(args)}: {msg[0]}")
    return done.stdout.strip()


def commit_of(tree: Path, ref: str) -> str:
    return git(tree, "rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}")


def write_lab(template: str, name: str, base: str, head: str, note: str) -> str:
    """Tonight's lab from the template; a placeholder it does not know is an error."""
    fill = {"NAME": name, "BASE_BUILD": base, "HEAD_BUILD": head, "BASE_NOTE": note}
    try:
        text = string.Template(template).substitute(fill)
    except (KeyError, ValueError) as e:
        raise RecipeError(
            f"the lab template has an unknown placeholder {e}: use ${{BASE_BUILD}}, "
            "${HEAD_BUILD}, ${NAME} or ${BASE_NOTE} (write $$ for a dollar sign)"
        ) from None
    if base not in text or head not in text:
        raise RecipeError("the lab template must have columns ${BASE_BUILD} and ${HEAD_BUILD}")
    return text


def lab_flavors(lab: dict[str, Any], engine: str) -> set[str]:
    """The compile flavors the lab defines itself (dbregress fetch cannot build those)."""
    return set((lab.get("flavors") or {}).get(FAMILY[engine], {}))


def choose_base(args: argparse.Namespace, state: dict[str, Any]) -> tuple[str, str | None, str]:
    """(base build, its commit or None for a registry build, where it comes from)."""
    good = state.get("last_good", {}).get(args.name)
    if good and args.against == "last-good":
        build = source_build(args.engine, args.tree, good["commit"], args.flavor)
        return build, good["commit"], f"the last good night {good['night']}"
    if not args.base:
        raise RecipeError(
            "no good night yet and no --base: give --base, e.g. the last release's tag "
            "(REL_17_2) or a registry build (postgres@17.2.0)"
        )
    if "@" in args.base:
        return args.base, None, f"--base {args.base}"
    commit = commit_of(args.tree, args.base)
    build = source_build(args.engine, args.tree, commit, args.flavor)
    return build, commit, f"--base {args.base}"


def gate_status(code: int | None) -> int:
    """The recipe's status from the gate's: 0 and 1 as they are, 2 for anything the gate
    did not judge, 3 for what it could not do (no run, a dbregress bug, a signal)."""
    if code in (GREEN, REGRESSION, NOT_JUDGED):
        return code
    return FAILED


GATED = {"slower": ("cost", "time"), "slower:cost": ("cost",), "slower:time": ("time",)}


def ungated(gate: str) -> tuple[str, ...]:
    """The lanes the gate does not judge (measured and reported all the same)."""
    return tuple(lane for lane in ("cost", "time") if lane not in GATED[gate])


def slower_steps(
    verdicts: dict[str, Any], gate: str, lanes: tuple[str, ...] | None = None
) -> list[tuple[str, str, float]]:
    """(step, lane, ratio) of each step confirmed slower in a lane the gate judges (or in
    `lanes`), the cost lane's first (its counts do not depend on the host's noise), then
    by how much."""
    lanes = GATED[gate] if lanes is None else lanes
    rows: list[tuple[bool, float, str, float]] = []  # (time?, sort key, step, its ratio)
    for comparison in verdicts.get("comparisons", []):
        for column in comparison.get("columns", []):
            for v in column.get("steps", []):
                cost = v.get("cost") or {}
                if "cost" in lanes and cost.get("verdict") == "slower":
                    ratio = cost.get("ratio") or 1.0
                    rows.append((False, -ratio, v["step"], ratio))
                if "time" in lanes and v.get("verdict") == "slower":
                    # a QPS ratio below 1 is slower: its inverse sorts like a cost ratio;
                    # the QPS ratio itself is what is recorded
                    qps = v.get("ratio") or 1.0
                    rows.append((True, -(1 / qps), v["step"], qps))
    out: list[tuple[str, str, float]] = []
    for time_lane, _, step, ratio in sorted(rows):
        if step not in {s for s, _, _ in out}:
            out.append((step, "time" if time_lane else "cost", ratio))
    return out


def bisect_command(
    args: argparse.Namespace, lab: dict[str, Any], good: str, bad: str, step: str, lane: str
) -> list[str]:
    """`dbregress bisect --src` on one step at the lab's own sizes, flavor and config."""
    benchmark = lab.get("benchmark", "insert")
    cmd = [*shlex.split(args.dbregress), "bisect", "--src", str(args.tree), good, bad]
    cmd += ["--engine", args.engine, "--flavor", args.flavor, "--step", step, "--lane", lane]
    # a night bisects a regression: a change the other way is never its answer
    cmd += ["--direction", "slower", "--benchmark", benchmark, "--results", str(args.results)]
    cmd += ["--replays", str(min(20, max(2, int(lab.get("count_replays", 3)))))]
    configs = {c.get("config") for c in lab.get("column", []) if c.get("config")}
    if len(configs) == 1:
        cmd += ["--config", configs.pop()]
    for key, value in (lab.get(benchmark) or {}).items():
        if key in ("steps", "only") and isinstance(value, list):
            # the night's own steps: the state the bisected step runs in (without them
            # the bisection ran the benchmark's default steps, a different table, and
            # measured a change as +0.81% where the night measured +0.57%)
            cmd += ["--size", f"{key}={','.join(str(v) for v in value)}"]
        elif not isinstance(value, list | dict):
            cmd += ["--size", f"{key}={value}"]
    if args.flavor in lab_flavors(lab, args.engine) and args.lab:
        cmd += ["--lab", str(args.lab.resolve())]
    return cmd


def load_state(path: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return {"format": 1, "last_good": {}, "reference": {}, "nights": []}
    except ValueError as e:
        raise RecipeError(f"{path} is not JSON ({e}): move it away to start afresh") from None
    state.setdefault("last_good", {})
    state.setdefault("reference", {})
    state.setdefault("nights", [])
    return state


def save_state(path: Path, state: dict[str, Any]) -> None:
    """Written whole and renamed into place: a kill never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def record_night(state: dict[str, Any], night: dict[str, Any]) -> None:
    """The night's entry, replaced or added; a green night becomes the last good one,
    unless a lane its gate does not judge confirmed a step slower (`held`); the night
    that first names a drift reference keeps it for its lab."""
    nights = [n for n in state["nights"] if n.get("night") != night["night"]]
    state["nights"] = [*nights, night]
    if night.get("status") == GREEN and night.get("run") and not night.get("held"):
        keep = {"commit": "commit", "run": "run", "date": "ended", "night": "night"}
        state["last_good"][night["lab"]] = {k: night[v] for k, v in keep.items()}
    if night.get("reference"):
        state.setdefault("reference", {})[night["lab"]] = night["reference"]


def mark_unfinished(state: dict[str, Any]) -> None:
    """A night still "running" while we hold the lock was killed before it ended."""
    for night in state["nights"]:
        if night.get("outcome") == "running":
            night["outcome"] = "killed"
            night["why"] = "the recipe was killed before it ended (SIGKILL, reboot)"


@contextlib.contextmanager
def night_lock(folder: Path) -> Iterator[None]:
    """One night at a time per results folder: a second one exits at once."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise RecipeError(f"another night is running ({f.read().strip()})") from None
        f.truncate(0)
        f.write(f"pid {os.getpid()}, since {now()}\n")
        f.flush()
        yield


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stop(signum: int, _frame: Any) -> None:
    raise Stopped(signal.Signals(signum).name)


class Night:
    """Runs the night's steps, each logged to its own file, and keeps its record."""

    def __init__(self, args: argparse.Namespace, commit: str, subject: str) -> None:
        self.args, self.t0 = args, time.monotonic()
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        self.id = f"{stamp}-{commit[:12]}"
        self.dir = args.results / "nightly" / self.id
        self.state_path = args.results / "nightly" / "state.json"
        self.record: dict[str, Any] = {
            "night": self.id, "lab": args.name, "engine": args.engine, "tree": str(args.tree),
            "flavor": args.flavor, "commit": commit, "subject": subject, "started": now(),
            "ended": None, "outcome": "running", "status": None, "why": "", "run": None,
            "base": None, "base_commit": None, "gate": None, "slower": [], "held": None,
            "reference": None, "drift": None, "bisections": [], "site": None, "steps": {},
        }  # fmt: skip

    def say(self, line: str) -> None:
        took = dt.timedelta(seconds=int(time.monotonic() - self.t0))
        print(f"nightly [{took}] {line}", file=sys.stderr, flush=True)

    def step(self, name: str, cmd: list[str], stdout: Path | None = None) -> int:
        """Run one command into NIGHT/name.log (its stdout into `stdout` when given); its
        exit status, -1 if it could not start."""
        if self.args.dry_run:
            print(shlex.join(cmd) + (f" > {stdout.name}" if stdout else ""))
            return 0
        self.dir.mkdir(parents=True, exist_ok=True)
        log = self.dir / f"{name}.log"
        t = time.monotonic()
        with open(log, "w") as out, open(stdout or os.devnull, "w") as data:
            out.write(f"$ {shlex.join(cmd)}\n")
            out.flush()
            err = out if stdout else subprocess.STDOUT
            try:
                proc = subprocess.Popen(cmd, stdout=data if stdout else out, stderr=err, text=True)
            except OSError as e:
                out.write(f"could not start: {e}\n")
                code = -1
            else:
                code = _wait(proc)
        took = round(time.monotonic() - t, 1)
        self.record["steps"][name] = {"exit": code, "seconds": took, "log": str(log)}
        self.say(f"{name}: exit {code} in {took:.0f} s ({log})")
        return code

    def save(self) -> None:
        if self.args.dry_run:
            return
        state = load_state(self.state_path)
        record_night(state, self.record)
        save_state(self.state_path, state)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "night.json").write_text(json.dumps(self.record, indent=2) + "\n")


def _wait(proc: subprocess.Popen[str]) -> int:
    """The child's status; if we are stopped meanwhile, it is stopped too (SIGTERM, so
    dbregress keeps what it finished), then waited for."""
    try:
        return proc.wait()
    except BaseException:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def run_night(night: Night) -> int:
    """Steps 2 to 8 of docs/nightly.md; the recipe's exit status."""
    args, rec = night.args, night.record
    state = load_state(night.state_path)
    good = state["last_good"].get(args.name)
    if good and good["commit"] == rec["commit"] and not args.force:
        rec["outcome"], rec["why"] = "unchanged", f"{rec['commit'][:12]} is the last good night's"
        return GREEN
    base, base_commit, note = choose_base(args, state)
    rec.update(base=base, base_commit=base_commit)
    head = source_build(args.engine, args.tree, rec["commit"], args.flavor)
    template = (
        args.lab.read_text() if args.lab else KV_LAB if args.engine == "rocksdb" else INSERT_LAB
    )
    text = write_lab(template, args.name, base, head, note)
    lab = tomllib.loads(text)
    lab_path = night.dir / "lab.toml"
    if args.dry_run:
        print(f"# {lab_path}:\n# " + text.replace("\n", "\n# ").rstrip("# "))
    else:
        night.dir.mkdir(parents=True, exist_ok=True)
        lab_path.write_text(text)
    dbr = shlex.split(args.dbregress)
    if args.flavor not in lab_flavors(lab, args.engine):  # the lab's own flavors: run builds
        for side, build in (("base", base), ("head", head)):
            if night.step(f"fetch-{side}", [*dbr, "fetch", build]) != 0:
                raise RecipeError(build_failed(args, side, build, good))
    before = set(args.results.glob(f"*-{args.name}"))
    night.step("run", [*dbr, "run", str(lab_path), "--results", str(args.results)])
    made = sorted(set(args.results.glob(f"*-{args.name}")) - before)
    run_id = made[-1].name if made else ("RUN" if args.dry_run else None)
    if run_id is None:
        raise RecipeError("dbregress run made no run folder: see run.log")
    rec["run"] = run_id
    gate = night.step("gate", [*dbr, "report", run_id, "--results", str(args.results),
                               "--fail-on", args.gate])  # fmt: skip
    rec["gate"] = gate
    status = gate_status(gate)
    if not index_run(night, dbr, run_id) and status == GREEN:
        status = NOT_JUDGED  # a green night is one the history holds: the next compares to it
    verdicts_path = made[-1] / "verdicts.json" if made else None
    if status == GREEN and not args.dry_run:
        hold(night, verdicts_path)
    status = drift(night, state, dbr, base, base_commit, status)  # keeps the reference
    write_site(night, dbr)
    if status == REGRESSION or args.dry_run:
        if args.dry_run:
            print("# on a confirmed regression (gate exit 1), for each step it named:")
        verdicts = verdicts_path
        # the range the gate judged: from the run's own base column (the last good night,
        # or --base's commit when measured against it); a registry base has no commit
        # in the tree, so the range starts at the last good night, if any
        bisect(night, lab, base_commit or (good["commit"] if good else None), verdicts)
        write_site(night, dbr)
    return status


def build_failed(args: argparse.Namespace, side: str, build: str, good: Any) -> str:
    """Why the night failed at a build, and the way forward when the base is the last
    good night's commit: it will not build on the nights after either."""
    why = f"the {side} build {build} failed: see fetch-{side}.log"
    if side == "base" and good and args.against == "last-good":
        why += (
            f". If the last good night's commit {good['commit'][:12]} no longer builds "
            "(a compiler or library changed), measure one night against a commit that "
            "does: --against base --base REF (tonight's parent, HEAD~1); a green night "
            "becomes the last good night, and the nights after go on from it"
        )
    return why


def hold(night: Night, verdicts: Path | None) -> None:
    """A green night whose ungated lane confirmed a step slower does not become the last
    good night (unless --accept-ungated): the next night measures against the same base
    again, so the regression stays visible (and on the site) until it is fixed."""
    args, rec = night.args, night.record
    lanes = ungated(args.gate)
    if not lanes:
        return
    try:
        if verdicts is None:
            raise OSError("no run folder")
        found = slower_steps(json.loads(verdicts.read_text()), args.gate, lanes)
    except (OSError, ValueError) as e:
        held = f"the {'/'.join(lanes)} lane's verdicts could not be read ({e})"
    else:
        steps = ", ".join(f"{s} ({lane} {r:.3f})" for s, lane, r in found)
        held = f"confirmed slower in a lane the gate does not judge: {steps}" if found else ""
    if not held:
        return
    if args.accept_ungated:
        rec["why"] = f"{held} (accepted: --accept-ungated)"
    else:
        rec["held"] = held
        rec["why"] = f"{held}; the last good night stays (--accept-ungated moves it)"
    night.say(rec["why"])


def drift(
    night: Night, state: dict[str, Any], dbr: list[str], base: str, commit: str | None,
    status: int,
) -> int:  # fmt: skip
    """The drift since the fixed reference (`dbregress ledger`): 1 when a step's
    cumulative cost change is above --drift (its interval all above), naming the nights
    and commits that contributed most; 2 when it could not be judged. The reference is
    --reference, else the one the state file keeps, else tonight's run (its base column
    is the first night's base) once the gate judged it."""
    args, rec = night.args, night.record
    ref = state["reference"].get(args.name)
    if args.reference and (not ref or ref.get("run") != args.reference):
        if not (args.results / args.reference).is_dir() and not args.dry_run:
            raise RecipeError(f"--reference {args.reference}: no such run in {args.results}")
        ref = {"run": args.reference, "night": None, "since": rec["night"]}
    if not ref and rec["gate"] in (GREEN, REGRESSION):
        ref = {"run": rec["run"], "night": rec["night"], "build": base, "commit": commit}
    rec["reference"] = ref
    if args.drift is None:
        return status
    if not ref:
        rec["drift"] = {"judged": False, "why": "no reference yet: the gate judged no run"}
        return NOT_JUDGED if status == GREEN else status
    cmd = [*dbr, "ledger", "--lab", args.name, "--reference", ref["run"]]
    cmd += ["--results", str(args.results), "--format", "json"]
    cmd += ["--fail-on", f"drift:{args.drift * 100:g}%"]
    out = night.dir / "ledger.json"
    code = night.step("ledger", cmd, stdout=out)
    if args.dry_run:
        return status
    nights = {n.get("run"): n for n in [*state["nights"], rec]}
    judged = read_drift(out, code, args.drift, rec["run"], nights)
    rec["drift"] = judged
    if not judged["judged"]:
        night.say(f"drift not judged: {judged['why']}")
        return NOT_JUDGED if status == GREEN else status
    if judged["above"]:
        line = "; ".join(drift_line(d) for d in judged["above"])
        night.say(f"drift since {ref['run']} above {args.drift:.1%}: {line}")
        # a confirmed drift of tonight's run outranks a gate that did not judge every
        # step (as dbregress's own gate puts a confirmed slower step before a gap): the
        # step undecided against the last good night may be the very drift, after a
        # night that could not be judged left the last good night further back
        tonights = any(d.get("run") == rec["run"] for d in judged["above"])
        if status == GREEN or (status == NOT_JUDGED and rec["gate"] == NOT_JUDGED and tonights):
            rec["outcome"] = "drift"
            rec["why"] = f"drift since the reference {ref['run']}: {line}"
            if status == NOT_JUDGED:
                rec["why"] += "; the gate against the last good night did not judge every step"
            return REGRESSION
    return status


def read_drift(
    path: Path, code: int, limit: float, tonight: str, nights: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The ledger's answer (its JSON, format 1): the steps whose cumulative cost change
    since the reference is above `limit` with its whole interval, each with the nights
    and commits that contributed most (largest increments first). Not judged (fail
    closed) when the ledger has no reference, or no figure of tonight's run for a step:
    a step it could not size is not a step within the limit."""
    if code not in (0, 1):
        return {"judged": False, "why": f"dbregress ledger exit {code}: see ledger.log"}
    try:
        found = json.loads(path.read_text())
        beyond = found["drift"]["beyond"]
        unsized = unsized_steps(found, tonight)
        above = []
        for d in beyond:
            lo, hi = d["ci"]
            if lo <= 1 + limit:  # within the limit, or beyond it the faster way
                continue
            contributors = sorted(d.get("contributors") or [], key=lambda c: -c["ratio"])
            named = [
                {**c, "night": (nights.get(c["run"]) or {}).get("night")}
                for c in contributors
                if c["ratio"] > 1
            ][:3]
            above.append({"comparison": d["comparison"], "step": d["step"], "run": d.get("run"),
                          "ratio": d["ratio"], "ci": [lo, hi], "contributors": named})  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return {"judged": False, "why": f"the ledger's JSON could not be read ({e!r})"}
    if code == 1 and not beyond:
        return {"judged": False, "why": "dbregress ledger exit 1 but no step beyond the limit"}
    if unsized and not above:
        return {"judged": False, "why": unsized}
    return {"judged": True, "limit": limit, "above": above, "unsized": unsized}


def unsized_steps(found: dict[str, Any], tonight: str) -> str:
    """Why the ledger did not size tonight's run against the reference ("" when it did
    for every step): no reference, no step, or a step without tonight's cumulative
    figure (counted by another method than the reference: --reference moves it)."""
    if not found.get("reference"):
        return "the ledger found no reference run: " + "; ".join(found.get("notes") or [])[:300]
    if not found["steps"]:
        return "the ledger has no step of the cost lane to size"
    missing = []
    for s in found["steps"]:
        mine = [p for p in s["points"] if p["run"] == tonight]
        if not any((p.get("cumulative") or {}).get("ratio") is not None for p in mine):
            missing.append(f"{s['comparison']}/{s['step']}")
    if missing:
        return (
            f"no cumulative figure of tonight's run {tonight} for {', '.join(missing)} "
            "(counted by another method than the reference? --reference RUN moves it)"
        )
    return ""


def drift_line(d: dict[str, Any]) -> str:
    lo, hi = d["ci"]
    most = ", ".join(
        f"{c.get('night') or c['run']} ({(c.get('commit') or '?')[:12]}, "
        f"{(c['ratio'] - 1) * 100:+.2f}%)"
        for c in d["contributors"]
    )
    size = f"{(d['ratio'] - 1) * 100:+.2f}% [{(lo - 1) * 100:+.2f}, {(hi - 1) * 100:+.2f}]"
    return f"{d['step']} {size}" + (f", most from {most}" if most else "")


def index_run(night: Night, dbr: list[str], run_id: str) -> bool:
    """Whether the history holds tonight's run (`dbregress run` indexes it). Not
    indexed here when it does not: `history --reindex` would also index the folders of
    bisections under the results folder as labs of their own."""
    args = night.args
    cmd = [*dbr, "history", args.name, "--results", str(args.results), "--last", "2"]
    code = night.step("history", cmd)
    if args.dry_run:
        return True
    held = code == 0 and run_id in (night.dir / "history.log").read_text()
    if not held:
        night.say(f"the history does not show run {run_id} (see history.log): not judged")
    return held


def write_site(night: Night, dbr: list[str]) -> None:
    """The site; its failure is logged and the night goes on (it judges nothing)."""
    args = night.args
    name = "site" if "site" not in night.record["steps"] else "site-after-bisect"
    code = night.step(name, [*dbr, "site", "--results", str(args.results),
                             "--out", str(args.site_out)])  # fmt: skip
    night.record["site"] = "written" if code == 0 else f"failed (exit {code}, {name}.log)"


def bisect(night: Night, lab: dict[str, Any], good: str | None, verdicts: Path | None) -> None:
    """Bisect the commits since the last good night on the steps the gate named."""
    args, rec = night.args, night.record
    named = slower_steps(json.loads(verdicts.read_text()), args.gate) if verdicts else []
    if args.dry_run:
        named = [("STEP", "cost", 0.0)]
    rec["slower"] = [{"step": s, "lane": lane, "ratio": r} for s, lane, r in named]
    if good is None:
        night.say("no good commit of this tree yet (a registry --base): nothing to bisect")
        return
    for step, lane, _ in named[: max(0, args.bisect_steps)]:
        before = set(args.results.glob("bisect-*"))
        cmd = bisect_command(args, lab, good, rec["commit"], step, lane)
        code = night.step(f"bisect-{step}", cmd)
        made = sorted(set(args.results.glob("bisect-*")) - before)
        answer: dict[str, Any] = {"step": step, "lane": lane, "exit": code, "good": good}
        if made and (made[-1] / "bisect.json").is_file():
            found = json.loads((made[-1] / "bisect.json").read_text())
            answer.update(folder=made[-1].name, first_bad=found.get("first_bad"))
            # the direction looked for (bisect --direction; slower for a regression)
            answer.update(direction=(found.get("request") or {}).get("direction"))
            answer.update(candidates=found.get("candidates"), stopped=found.get("stopped"))
        rec["bisections"].append(answer)
        if not args.dry_run:
            night.say(f"bisection of {step} ({lane} lane): {bisect_answer(answer)}")


def bisect_answer(answer: dict[str, Any]) -> str:
    if answer.get("first_bad"):
        return f"first bad {answer['first_bad']}"
    if answer.get("candidates"):
        return f"one of {', '.join(answer['candidates'])}"
    return f"no answer ({answer.get('stopped') or 'exit ' + str(answer.get('exit'))})"


def finish(night: Night, status: int, why: str = "") -> int:
    rec = night.record
    if rec["outcome"] == "running":
        rec["outcome"] = OUTCOMES[status]
    rec.update(status=status, why=rec["why"] or why, ended=now())
    rec["wall_s"] = round(time.monotonic() - night.t0, 1)
    night.save()
    line = f"night {night.id}: {rec['outcome']} (exit {status}); run {rec['run'] or '-'}"
    found = "; ".join(bisect_answer(b) for b in rec["bisections"])
    site = rec.get("site")
    print(
        line
        + (f"; bisection: {found}" if found else "")
        + (f"; site: {site}" if site not in (None, "written") else "")
        + (f"; {rec['why']}" * bool(rec["why"]))
    )
    return status


def failed(night: Night, why: str) -> None:
    """A night that failed (a build that does not build, a git command) is recorded
    first, then the site is written again, so that it shows the failed night."""
    rec = night.record
    if rec["outcome"] == "running":
        rec["outcome"] = OUTCOMES[FAILED]
    rec.update(status=FAILED, why=rec["why"] or why, ended=now())
    night.save()
    if not night.args.dry_run:
        write_site(night, shlex.split(night.args.dbregress))


def night_under_lock(night: Night) -> int:
    """The night, recorded as running first so that even a kill leaves a trace."""
    state = load_state(night.state_path)
    mark_unfinished(state)
    save_state(night.state_path, state)
    night.save()
    rec = night.record
    night.say(f"night {night.id}: {rec['tree']} at {rec['commit'][:12]} {rec['subject']!r}")
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        return finish(night, run_night(night))
    except RecipeError as e:
        night.say(str(e))
        failed(night, str(e))
        return finish(night, FAILED, str(e))
    except (Stopped, KeyboardInterrupt) as e:
        rec["outcome"] = "interrupted"
        return finish(night, NOT_JUDGED, f"stopped by {e or 'SIGINT'}")
    except Exception as e:  # a bug of the recipe's own: said, recorded, exit 3 (never 1)
        traceback.print_exc()
        night.say(f"the recipe failed: {e!r}")
        return finish(night, FAILED, f"the recipe failed: {e!r}")
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        commit = commit_of(args.tree, args.ref)
        night = Night(args, commit, git(args.tree, "log", "-1", "--format=%s", commit))
        if args.dry_run:
            return run_night(night)
        with night_lock(args.results / "nightly"):
            return night_under_lock(night)
    except RecipeError as e:  # before the night began: git, the lock, the state file
        print(f"nightly: {e}", file=sys.stderr)
        return NOT_JUDGED if "another night" in str(e) else FAILED
    except OSError as e:  # the results folder: unwritable, a full disk (never exit 1)
        print(f"nightly: the recipe failed: {e}", file=sys.stderr)
        return FAILED
    except Exception:  # a bug of the recipe's own, even while recording one: exit 3
        traceback.print_exc()
        print("nightly: the recipe failed (the traceback above)", file=sys.stderr)
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
