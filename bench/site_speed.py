"""How fast `dbregress site` renders a long history, and how fast its pages open.

    uv run python bench/site_speed.py [--runs 500] [--steps 40] [--work DIR]
                                      [--loads 3] [--commits]

1. Writes `--runs` nightly runs of one lab (`--steps` steps; columns base and head) in
   both lanes, as the runner and the cost lane write them: run.json by RunWriter, each
   step result as JSON in its job's folder, three counting replays a column, a small
   verdicts.json (head against base) and a stand-in report.html. The head moves at run
   `--shift-at` (every other step: 10% fewer queries a second, 10% more cycles an
   operation); at run `--method-at` the method changes (another loadgen_sha256 in
   run.json's method_identity; every count moves 2%). With `--commits` the head is a
   source build of a new commit every night, as the nightly recipe's is, instead of one
   release. The values are made up (seeded). The folder is indexed, kept and reused by
   a later call with the same parameters; writing it is no part of any figure.
2. Times `dbregress site` in a fresh process: cold (an empty folder), after one more
   run (incremental; counts the files written, by mtime, and changed, by content), and
   again with nothing new.
3. Times the index, the lab page, a step page that moves and the "what moved" page in
   headless Chromium: each opens in an iframe of a wrapper page that writes the
   iframe's navigation timing (navigation start to the end of its load event; then to
   its layout done) into its DOM, read from --dump-dom. The median of `--loads`, each a
   fresh Chromium; Chromium's own start (about:blank) beside.
4. Prints a table and the ratios to the issue's targets (10 s; 1 s a page).

Exits 0 whatever the figures are; 1 when something fails to run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbregress.lab.file import Lab, load_lab
from dbregress.lab.micro_names import PRE, READS
from dbregress.store.files import write_json
from dbregress.store.history import History, reindex
from dbregress.store.replays import save_replay
from dbregress.store.run import RunWriter

FORMAT = 1  # raise when the generated folder changes for the same parameters
RENDER_TARGET_S = 10.0
OPEN_TARGET_S = 1.0
LAB_NAME = "site-bench"
BASE_BUILD, HEAD_BUILD = "mysql@8.0.40", "mysql@8.4.3"
REPEATS, REPLAYS = 3, 3
LAB = f"""\
name = "{LAB_NAME}"
benchmark = "micro"
placement = "same"
repeats = {REPEATS}
count_replays = {REPLAYS}
column = [{{label = "base", build = "{BASE_BUILD}"}}, {{label = "head", build = "{HEAD_BUILD}"}}]
micro = {{ rows = 1000, seconds = 17 }}
"""
# fmt: off
HOST = {"hostname": "bench1", "kernel": "Linux 6.1.0 #1 SMP", "machine": "x86_64",
        "cpu_model": "Synthetic CPU", "cpu_count": 2, "cpu_affinity": [0, 1],
        "mem_total_bytes": 16 * 2**30}
QUIET_HOST = {"window_s": 17.0, "cpus": 2, "steal_s": 0.0, "busy_s": 1.0, "other_cpu_s": 0.0,
              "steal_frac": 0.0, "other_cpu_frac": 0.0, "cpu_mhz": [], "governor": None}
# One fixed method identity (not this checkout's: the folder must not change with
# dbregress's version); from --method-at on, another loadgen binary.
IDENTITY = {"dbregress": "0.1.0+bench", "loadgen_sha256": "1111111111111111",
            "valgrind": "valgrind-3.19.0", "libc": "glibc 2.36",
            "caches": "--I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64",
            "cost_model": "l1+5ll+35ram", "counting_profile": "quiet-v4",
            "cpu_features": "synthetic"}
OTHER_LOADGEN = "2222222222222222"
_WINDOW = {"kind": "mysql", "hits": None, "misses": 0.0, "ops": 1000}
STATE = {"engine_state": {"counted": _WINDOW, "timed": _WINDOW, "tolerance_misses_per_op": None},
         "state_mismatch": None}
# fmt: on
SHIFT = 0.10  # the head's move at --shift-at, on every other step
METHOD_MOVE = 0.02  # every count's move under the other loadgen
PAGE_TIMEOUT_S = 120


@dataclass(frozen=True)
class Params:
    runs: int
    steps: int
    shift_at: int
    method_at: int
    commits: bool

    def as_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **self.__dict__}


def step_names(n: int) -> list[str]:
    names = [*(r + PRE for r in READS), *READS]
    names += [f"extra-{i:02d}" for i in range(len(names), n)]
    return names[:n]


# ---- the generated results folder ----------------------------------------------------


def levels(p: Params, names: list[str]) -> dict[str, tuple[float, float]]:
    """step -> (the base's queries a second, its cycles an operation), seeded."""
    rng = random.Random(7)
    out = {}
    for s in names:
        qps = 10 ** rng.uniform(3, 5)
        out[s] = (qps, 2.0e9 / qps * rng.uniform(0.8, 1.2))
    return out


def factors(p: Params, index: int, step_no: int, column: str) -> tuple[float, float]:
    """(QPS factor, cycles factor) of a column's step in run `index`."""
    qps, cycles = 1.0, 1.0
    if column == "head" and index >= p.shift_at and step_no % 2 == 0:
        qps, cycles = 1 - SHIFT, 1 + SHIFT
    if index >= p.method_at:
        cycles *= 1 + METHOD_MOVE
    return qps, cycles


def head_build(p: Params, index: int) -> tuple[str, dict[str, Any]]:
    """The head column's build spec and run.json build record in run `index`."""
    if not p.commits:
        return HEAD_BUILD, {"source": "maven", "sha256": "bb" * 8, "spec": HEAD_BUILD}
    sha = hashlib.sha1(f"night {index}".encode()).hexdigest()
    spec = f"mysql@src:mysql-server#{sha[:12]}+rel"
    record = {"source": "src", "commit": sha, "subject": f"night {index}: the day's merges"}
    return spec, {**record, "tree_id": sha, "flavor": "rel", "spec": spec}


# fmt: off
def step_result(column: str, repeat: int, step: str, qps: float) -> dict[str, Any]:
    """A stored step result as the runner writes it (schema/step-result.schema.json)."""
    count, cpu = int(qps * 17), 0.5e6 / qps
    latency = {"p50": 1e6 / qps, "p99": 3e6 / qps, "p999": 8e6 / qps, "max": 5e7 / qps,
               "mean": 1.2e6 / qps}
    return {
        "schema_version": 1, "kind": "step", "column": column, "repeat": repeat, "step": step,
        "status": "ok", "reported": True, "elapsed_s": 17.0,
        "q": {"op": "query", "unit": "ops", "count": count, "value": qps},
        "ops": {"query": {"ops": count, "rows": count, "errors": 0, "target_rows_per_s": None,
                          "latency_us": latency, "rows_per_s": qps, "ops_per_s": qps}},
        "server": {"user_s": 1.0, "system_s": 0.2, "ctx_switches": 10, "read_bytes": 0,
                   "write_bytes": 0},
        "client": None,
        "per_op": {"server_cpu_us": cpu, "client_cpu_us": cpu / 3, "cs": 1.0, "rkb": 0.0,
                   "wkb": 0.0, "ops_per_s": qps},
        "sla": None, "checks": {}, "db_size_bytes": 0,
        "placement": {"mode": "same", "server_cpus": [0], "client_cpus": [0]},
        "phases": {ph: {"wall_s": 0.0, "server_cpu_s": None, "client_cpu_s": 0.0}
                   for ph in ("setup", "warmup", "checks")},
        "window": {"warmup_s": 0.0, "measured_s": 17.0},
        "host": dict(QUIET_HOST), "inject_slowdown": 0.0,
    }
# fmt: on


def write_file(path: Path, value: Any) -> None:
    """The bytes store.files.write_json writes, without its fsync: a folder of 150,000
    step files is written in seconds rather than minutes."""
    path.write_text(json.dumps(value, indent=1, sort_keys=False) + "\n")


# fmt: off
def replay(column: str, number: int, build: str, identity: dict[str, Any],
           cycles: dict[str, float]) -> dict[str, Any]:
    """A counting replay of every step as cost/lane.py stores it."""
    steps = {}
    for i, (step, c) in enumerate(cycles.items(), start=1):
        per_op = {"instructions": c / 2, "estimated_cycles": c, "i1_misses": 1.0,
                  "d1_read_misses": 2.0, "d1_write_misses": 3.0, "ll_read_misses": 0.5,
                  "ll_write_misses": 0.25, "branch_mispredictions": 7.0, "system_calls": 0.1}
        steps[step] = {"index": i, "scope": "sessions", "spec": f"spec-{step}", "per_op": per_op,
                       **STATE}
    return {"comparison": "micro", "column": column, "replay": number, "build": build,
            "method_identity": identity, "status": "ok", "steps": steps, "took_s": 1.0}
# fmt: on


def verdict(ratio: float, half: float, faster_is: str) -> tuple[str, list[float]]:
    """A verdict word and interval for a ratio known to +-`half` (band 5%, cost 1%)."""
    ci = [ratio * (1 - half), ratio * (1 + half)]
    band = 0.05 if faster_is == "higher" else 0.01
    if ci[1] < 1 - band or ci[0] > 1 + band:
        up = ci[0] > 1
        return ("faster" if up == (faster_is == "higher") else "slower"), ci
    return ("same" if 1 - band <= ci[0] and ci[1] <= 1 + band else "undecided"), ci


# fmt: off
def verdicts_json(run_id: str, steps: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """A small verdicts.json (analysis/compare.py's shape, the parts the site reads):
    head against base, per step; `steps` holds step -> (QPS ratio, cycles ratio)."""
    rows, why = [], "synthetic (bench/site_speed.py)"
    for step, (q, c) in steps.items():
        word, ci = verdict(q, 0.02, "higher")
        cword, cci = verdict(c, 0.003, "lower")
        cost = {"metric": "estimated_cycles", "ratio": c, "ci": cci, "verdict": cword,
                "reason": why}
        rows.append({"step": step, "lane": "time", "ratio": q, "ci": ci, "verdict": word,
                     "reason": why, "cost": cost})
    comparison = {"name": "micro", "benchmark": "micro", "base": "base",
                  "columns": [{"label": "head", "steps": rows}]}
    return {"format_version": 1, "run_id": run_id, "lab": LAB_NAME, "status": "ok",
            "comparisons": [comparison]}
# fmt: on


def night(index: int) -> tuple[str, str]:
    """(run id, start time) of night `index`: one a day from 2025-01-01, 03:00 UTC."""
    day = time.gmtime(1735700400 + index * 86400)
    started = time.strftime("%Y-%m-%dT%H:%M:%S+0000", day)
    return time.strftime("%Y%m%d-%H%M%S", day) + f"-{LAB_NAME}", started


def write_run(results: Path, staging: Path, lab: Lab, p: Params, index: int) -> Path:
    """Run `index` (0 = the oldest night) of the lab, as the runner and the lane write it."""
    rng = random.Random(index)
    run_id, started = night(index)
    base_level = levels(p, step_names(p.steps))
    spec, head_record = head_build(p, index)
    writer = RunWriter(staging, lab, HOST)
    means: dict[tuple[str, str], list[float]] = {}
    for job in lab.jobs():
        writer.set_job(job, {"status": "ok"})
        label = job.column.label
        for n, (step, (qps, _)) in enumerate(base_level.items(), start=1):
            fq, _ = factors(p, index, n, label)
            q = qps * fq * math.exp(rng.gauss(0, 0.02))
            means.setdefault((label, step), []).append(q)
            path = writer.job_dir(job) / "steps" / f"{n:02d}-{step}.json"
            write_file(path, step_result(label, job.repeat, step, q))
    writer.finish("ok")
    record: Any = writer.record
    identity = dict(IDENTITY)
    if index >= p.method_at:
        identity["loadgen_sha256"] = OTHER_LOADGEN
    record.update(run_id=run_id, started_at=started, finished_at=started, method_identity=identity)
    record["columns"][1]["build"] = spec
    base_record = {"source": "maven", "sha256": "aa" * 8, "spec": BASE_BUILD}
    record["builds"] = {"base": base_record, "head": head_record}
    run = writer.path.rename(results / run_id)
    write_json(run / "run.json", record)
    ratios = counting_replays(run, p, index, identity, spec, rng)
    q_ratio = {
        s: statistics.median(means[("head", s)]) / statistics.median(means[("base", s)])
        for s in base_level
    }
    write_json(
        run / "verdicts.json",
        verdicts_json(run_id, {s: (q_ratio[s], ratios[s]) for s in base_level}),
    )
    (run / "report.html").write_text(
        f"<!doctype html><title>{run_id}</title><p>A stand-in: bench/site_speed.py writes "
        "no report.</p>\n"
    )
    return run


def counting_replays(
    run: Path, p: Params, index: int, identity: dict[str, Any], head_spec: str, rng: random.Random
) -> dict[str, float]:
    """Three replays a column of every step; step -> head's cycles over base's."""
    base_level = levels(p, step_names(p.steps))
    mean: dict[tuple[str, str], float] = {}
    for label, build in (("base", BASE_BUILD), ("head", head_spec)):
        for number in range(1, REPLAYS + 1):
            cycles = {}
            for n, (step, (_, c)) in enumerate(base_level.items(), start=1):
                _, fc = factors(p, index, n, label)
                cycles[step] = c * fc * math.exp(rng.gauss(0, 0.001))
                mean[(label, step)] = mean.get((label, step), 0.0) + cycles[step] / REPLAYS
            save_replay(run, label, number, replay(label, number, build, identity, cycles))
    return {s: mean[("head", s)] / mean[("base", s)] for s in base_level}


def generate(work: Path, p: Params) -> Path:
    """The results folder of `p`, written (and indexed) unless it is there already."""
    results, stamp = work / "results", work / "results" / "bench.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == p.as_json():
        return results
    shutil.rmtree(results, ignore_errors=True)
    partial, staging = work / "results.partial", work / "staging"
    for d in (partial, staging):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    (work / "lab.toml").write_text(LAB)
    lab = load_lab(work / "lab.toml")
    start = time.perf_counter()
    for index in range(p.runs):
        write_run(partial, staging, lab, p, index)
        if index % 50 == 49:
            print(f"  written {index + 1}/{p.runs} runs ({time.perf_counter() - start:.0f} s)")
    partial.rename(results)
    warnings = reindex(results)
    if warnings:
        raise RuntimeError("the generated folder did not index: " + "; ".join(warnings[:3]))
    write_json(stamp, p.as_json())  # last: a folder without it is written again
    print(f"  generated and indexed in {time.perf_counter() - start:.0f} s")
    return results


def add_one(work: Path, results: Path, p: Params) -> str:
    """One more night (run number `p.runs`), indexed as the runner indexes it."""
    lab = load_lab(work / "lab.toml")
    staging = work / "staging"
    staging.mkdir(exist_ok=True)
    run = write_run(results, staging, lab, p, p.runs)
    with History(results) as h:
        h.index_run(run)
    return run.name


def drop_extra(results: Path, p: Params) -> None:
    """Take away the run a previous call added (the cached folder holds `p.runs`)."""
    run_id, _ = night(p.runs)
    shutil.rmtree(results / run_id, ignore_errors=True)
    with History(results) as h:
        h.forget(run_id)


# ---- dbregress site --------------------------------------------------------------------


def render(results: Path, out: Path) -> tuple[float, str]:
    """Wall seconds of `dbregress site` in a fresh process, and what it printed."""
    site = ["site", "--results", str(results), "--out", str(out)]
    cmd = [sys.executable, "-m", "dbregress.cli.main", *site]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"dbregress site exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds, (done.stdout + done.stderr).strip()


Snapshot = dict[str, tuple[int, str]]  # site-relative path -> (mtime_ns, sha256)


def snapshot(out: Path) -> Snapshot:
    found = {}
    for top, _, files in os.walk(out):
        for name in files:
            path = Path(top) / name
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[path.relative_to(out).as_posix()] = (path.stat().st_mtime_ns, digest)
    return found


def changes(before: Snapshot, after: Snapshot) -> tuple[list[str], list[str], list[str]]:
    """(files written: new or a new mtime, files whose content changed or are new,
    files removed) between two snapshots of the site."""
    written = [f for f, (m, _) in after.items() if f not in before or before[f][0] != m]
    changed = [f for f, (_, d) in after.items() if f not in before or before[f][1] != d]
    return sorted(written), sorted(changed), sorted(set(before) - set(after))


# ---- Chromium --------------------------------------------------------------------------

# The iframe's own navigation timing needs its document to be reachable from the
# wrapper: file:// pages are each their own origin unless Chromium is started with
# --allow-file-access-from-files. Forcing layout (scrollHeight) after the load event
# measures the rendering work that the load event does not wait for. Both times are
# the iframe's own (from its navigation start).
WRAPPER = """<!doctype html><html><body>
<script>var t0 = performance.now();</script>
<iframe style="width:1400px;height:1000px;border:0" src="{src}" onload="
var t1 = performance.now(); var out = {{outer_ms: t1 - t0}};
try {{
  var n = this.contentWindow.performance.getEntriesByType('navigation')[0];
  out.load_ms = n.loadEventEnd; out.dcl_ms = n.domContentLoadedEventEnd;
  out.height = this.contentDocument.documentElement.scrollHeight;
  out.layout_ms = this.contentWindow.performance.now();
}} catch (e) {{ out.error = String(e); }}
document.getElementById('timing').textContent = JSON.stringify(out);"></iframe>
<pre id="timing">not loaded</pre>
</body></html>
"""
# fmt: off
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--allow-file-access-from-files")
# fmt: on


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    raise RuntimeError("no chromium on PATH: install Debian's chromium (make debian)")


def dump_dom(url: str) -> tuple[float, str]:
    """Wall seconds of a fresh headless Chromium that loads `url`, and its DOM."""
    with tempfile.TemporaryDirectory(prefix="site-speed-chromium-") as profile:
        cmd = [chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url]
        start = time.perf_counter()
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=PAGE_TIMEOUT_S, check=False
        )
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed on {url}:\n{done.stderr[-2000:]}")
    return seconds, done.stdout


def open_page(page: Path, scratch: Path) -> dict[str, float]:
    """One opening of a site page: the iframe's timings (ms) and Chromium's wall (s)."""
    wrapper = scratch / f"open-{page.stem}.html"
    wrapper.write_text(WRAPPER.format(src=page.resolve().as_uri()))
    wall, dom = dump_dom(wrapper.as_uri())
    text = dom.split('<pre id="timing">', 1)[-1].split("</pre>", 1)[0]
    try:
        found = json.loads(text.replace("&quot;", '"'))
    except ValueError:
        raise RuntimeError(f"no timing in the wrapper's DOM for {page}: {text[:200]}") from None
    if "error" in found:
        raise RuntimeError(f"cannot read the timing of {page}: {found['error']}")
    return {**found, "wall_s": wall}


def pages(out: Path, p: Params) -> dict[str, Path]:
    """The pages timed: the index, the lab's page, what moved, and the page of a step
    whose head moves (the second step; its chart has the change point)."""
    lab = out / LAB_NAME
    moving = step_names(p.steps)[1]
    steps = sorted(lab.glob(f"step-*-{moving}.html"))
    chosen = {
        "index": out / "index.html",
        "lab": lab / "index.html",
        f"step {moving}": steps[0] if steps else lab / f"step-{moving}.html",
        "what moved": lab / "moved.html",
    }
    missing = [str(page) for page in chosen.values() if not page.is_file()]
    if missing:
        raise RuntimeError(f"the site lacks {', '.join(missing)}")
    return chosen


def time_pages(out: Path, p: Params, loads: int) -> tuple[dict[str, dict[str, float]], float]:
    """page -> median timings over `loads` fresh Chromiums; and Chromium's own median
    wall seconds for about:blank."""
    blank = statistics.median(dump_dom("about:blank")[0] for _ in range(loads))
    timed = {}
    with tempfile.TemporaryDirectory(prefix="site-speed-") as scratch:
        for name, page in pages(out, p).items():
            runs = [open_page(page, Path(scratch)) for _ in range(loads)]
            timed[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            timed[name]["bytes"] = page.stat().st_size
    return timed, blank


# ---- the bench -------------------------------------------------------------------------


@dataclass
class Figures:
    cold: float = 0.0  # seconds of `dbregress site` into an empty folder
    warm: float = 0.0  # ... after one more run
    again: float = 0.0  # ... once more, nothing new
    counts: tuple[int, int, int, int] = (0, 0, 0, 0)  # written, changed, removed, total
    timed: dict[str, dict[str, float]] = field(default_factory=dict)
    blank: float = 0.0  # Chromium's wall seconds for about:blank


# fmt: off
def report(p: Params, f: Figures) -> None:
    written, changed, removed, total = f.counts
    print("\n| runs | steps | cold render s | incremental render s | again, nothing new s "
          "| files written / changed / removed / total (incremental) |")
    print("|---:|---:|---:|---:|---:|---|")
    print(f"| {p.runs} (+1) | {p.steps} | {f.cold:.2f} | {f.warm:.2f} | {f.again:.2f} "
          f"| {written} / {changed} / {removed} / {total} |")
    print("\n| page | size KB | load event ms | layout done ms | Chromium wall s "
          "| wall - about:blank s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, t in f.timed.items():
        print(f"| {name} | {t['bytes'] / 1e3:.0f} | {t['load_ms']:.0f} | {t['layout_ms']:.0f} "
              f"| {t['wall_s']:.2f} | {t['wall_s'] - f.blank:.2f} |")
    print(f"\nChromium start (about:blank, --dump-dom): {f.blank:.2f} s median")
    slowest = max(max(t["load_ms"], t["layout_ms"]) for t in f.timed.values()) / 1e3
    print(f"cold render: {f.cold:.2f} s = {f.cold / RENDER_TARGET_S:.2f} x the "
          f"{RENDER_TARGET_S:g} s target; incremental: {f.warm / RENDER_TARGET_S:.2f} x")
    print(f"slowest page open (load or layout): {slowest:.3f} s = "
          f"{slowest / OPEN_TARGET_S:.2f} x the {OPEN_TARGET_S:g} s target")
    print("load average (1, 5, 15 min) at the end: "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
# fmt: on


def bench(work: Path, p: Params, loads: int) -> Figures:
    f = Figures()
    print(f"results: {work / 'results'} ({p.runs} runs x {p.steps} steps)")
    results = generate(work, p)
    drop_extra(results, p)
    out = work / "site"
    shutil.rmtree(out, ignore_errors=True)
    f.cold, said = render(results, out)
    print(f"cold: {f.cold:.2f} s: {said}")
    before = snapshot(out)
    added = add_one(work, results, p)
    f.warm, said = render(results, out)
    print(f"incremental (+{added}): {f.warm:.2f} s: {said}")
    after = snapshot(out)
    written, changed, removed = changes(before, after)
    f.counts = (len(written), len(changed), len(removed), len(after))
    unchanged = sorted(set(after) - set(written))
    print(f"not written again: {', '.join(unchanged[:12]) or 'none'}")
    f.again, said = render(results, out)
    print(f"again, nothing new: {f.again:.2f} s: {said}")
    f.timed, f.blank = time_pages(out, p, loads)
    drop_extra(results, p)
    return f


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/dbregress-site-bench"))
    ap.add_argument("--shift-at", type=int, default=300)
    ap.add_argument("--method-at", type=int, default=400)
    ap.add_argument("--commits", action="store_true", help="the head: a new commit a night")
    ap.add_argument("--loads", type=int, default=3, help="Chromium loads per page")
    args = ap.parse_args()
    p = Params(args.runs, args.steps, args.shift_at, args.method_at, args.commits)
    try:
        figures = bench(args.work / ("commits" if p.commits else "release"), p, args.loads)
    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError) as e:
        print(f"site_speed: {e}", file=sys.stderr)
        return 1
    report(p, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
