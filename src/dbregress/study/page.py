"""A study's page (docs/studies.md, "The page"): self-contained Markdown with what was
run and where, per comparison our tables in the seed's layout (a row per step, a column
per column, each cell the report's ratio and verdict mark from verdicts.json), the
ledger, and the agreement with the seed's claims. Without a run (or for a study that
cannot run here) it says what it would run. Nothing of this machine is shown: each
param's value stands as `{name}`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from dbregress import benchmarks
from dbregress.lab.file import Comparison
from dbregress.report.verdict_tables import table
from dbregress.shapes.run import HostFacts
from dbregress.shapes.study import StudySizes
from dbregress.shapes.verdicts import StepVerdictJson, Verdicts
from dbregress.store.files import write_atomic
from dbregress.store.replays import load_lane
from dbregress.study import claims_table, ledger_table
from dbregress.study.agreement import Key, cost_figure, index, time_figure
from dbregress.study.file import Study
from dbregress.study.record import RunView, machine_values, scrub, sizes_of
from dbregress.study.render import column_builds

# an absolute path in a build string: after its engine's @ or a src:/ prefix
ABSOLUTE = re.compile(r"(?<=[@:])/[^#+\s`]*")
COST_TABLES = (("estimated_cycles", "estimated cycles"), ("instructions", "instructions"))


def cell(text: object) -> str:
    """Text for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def command(study: Study, scale: str = "small") -> str:
    params = "".join(f" --param {p}={{{p}}}" for p in study.params)
    return f"dbregress study run {study.name}{params} --scale {scale}"


def render(study: Study, run: RunView | None) -> str:
    """The page's Markdown."""
    parts = [*_head(study, run), *_facts(study, run), *_sizes(study, run), *_differences(study)]
    if run is None:
        for comp in study.lab.comparisons:
            parts += _comparison_head(study, comp, [c.label for c in comp.columns], None)
            parts += [f"Steps: {', '.join(_steps(comp))}.", ""]
        parts += claims_table.section(study, None)
    else:
        steps = index(run.verdicts)
        for comp in study.lab.comparisons:
            parts += _comparison(study, run, comp, steps)
        parts += ledger_table.section(run.path, steps)
        policy = run.verdicts["policy"]
        bands = {"time": policy["band"], "cost": policy.get("cost_band", 0.01)}
        parts += claims_table.section(study, claimed(study, run), bands, unfinished(run))
    text = "\n".join(parts).rstrip("\n") + "\n"
    return scrub(text, machine_values(study, run))


def _head(study: Study, run: RunView | None) -> list[str]:
    if run is not None:
        made = f"This page was written by `dbregress study page` from run `{run.record['run_id']}`."
    elif study.runnable:
        made = "Not run yet: this page says what the study would run (`dbregress study run`)."
    else:
        made = (
            "This study cannot run here: it needs "
            f"{(study.needs or ', '.join(study.params) or 'what its lab names').rstrip('. ')}. "
            "This page says what it would run."
        )
    why = unfinished(run) if run is not None else None
    warning = (
        []
        if why is None
        else [
            f"**This run did not finish: {why}. Its tables hold what it measured; a step, "
            "column or lane it did not reach shows `-` and its claims are not measured.**",
            "",
        ]
    )
    return [
        f"# {study.title}",
        "",
        f"Study `{study.name}` reproduces seed {study.seed}: {study.source}.",
        "",
        f"{made} What a study is, its file and how agreement is judged: docs/studies.md.",
        "",
        *warning,
    ]


def unfinished(run: RunView) -> str | None:
    """Why a run did not finish, or None: its time lane did not end `ok` (failed,
    interrupted, or never recorded its end), or its cost lane, planned, has no record
    of its end (cost/lane.json)."""
    record = run.record
    status = record.get("status", "?")
    failures = len(record.get("failures") or [])
    said = []
    if status == "running":
        said.append(
            "its time lane never recorded its end (status running: still running, or killed)"
        )
    elif status != "ok":
        said.append(f"its time lane ended {status}")
    if failures:
        said.append(f"{failures} failure(s) recorded in run.json")
    lane = record.get("cost_lane")
    if lane and lane.get("planned") and load_lane(run.path) is None:
        said.append("its cost lane did not record its end (cost/lane.json)")
    return "; ".join(said) or None


def _facts(study: Study, run: RunView | None) -> list[str]:
    params = [f"- `{{{p}}}`: {cell(what)}" for p, what in study.params.items()]
    said = ["Params (their values are this machine's and are not shown):", "", *params, ""]
    if run is None:
        return ["## The run", "", f"Command: `{command(study)}`", "", *(said if params else [])]
    rec, record = run.study, run.record
    if rec is not None:
        wall = _duration(rec["wall_s"]) + " (both lanes and the report)" if rec["wall_s"] else "-"
        ran = f"`{command(study, rec['scale'])}`"
        if rec["study"] != study.name:  # its own command, not this study's
            ran = f"`dbregress study run {rec['study']}` (another study), --scale {rec['scale']}"
        rows = [
            ["command", ran],
            ["started", _when(rec["started_at"])],
            ["wall time", wall],
        ]
    else:
        lane = _span(record.get("started_at"), record.get("finished_at"))
        rows = [
            ["command", "not recorded: the run was not made by `dbregress study run`"],
            ["started", _when(record.get("started_at"))],
            ["wall time", f"not recorded; the time lane ran {lane}"],
        ]
    identity = record.get("method_identity")
    version = identity["dbregress"] if identity else "not recorded"
    rows += [
        ["host", _host(rec["host"] if rec is not None else record.get("host", {}))],
        ["run", f"`{record['run_id']}`, status {record.get('status', '?')}"],
        ["lanes", _lanes(run.verdicts)],
        ["dbregress", version],
    ]
    if record.get("lab") != study.lab.name:
        rows.append(["note", f"a run of lab {record.get('lab')}, not {study.lab.name}"])
    return ["## The run", "", *(f"- {k}: {cell(v)}" for k, v in rows), "", *said]


def _when(stamp: str | None) -> str:
    if not stamp:
        return "-"
    text = stamp.replace("T", " ")
    for utc in ("Z", "+0000", "+00:00"):
        if text.endswith(utc):
            return text.removesuffix(utc) + " UTC"
    return text


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{seconds:.1f} s"


def _span(start: str | None, end: str | None) -> str:
    return f"from {_when(start)} to {_when(end)}" if start and end else "(no end recorded)"


def _host(host: HostFacts | Mapping[str, object]) -> str:
    cores = host.get("cpu_count") or host.get("cores")
    memory = host.get("mem_total_bytes")
    parts = [
        f"{cores} cores" if cores else "cores not recorded",
        str(host.get("cpu_model") or "CPU model not recorded"),
        str(host.get("machine") or ""),
        f"{int(memory) / 2**30:.0f} GiB of memory" if isinstance(memory, int) else "",
        str(host.get("kernel") or ""),
    ]
    return ", ".join(p for p in parts if p)


def _lanes(verdicts: Verdicts) -> str:
    lanes = verdicts.get("lanes")
    if lanes is None:
        return "not recorded"
    why = "; ".join(f"{lane} lane not judged: {w}" for lane, w in lanes["not_judged"].items())
    judged = ", ".join(lanes["judged"]) or "none"
    left_out = len(verdicts.get("disturbed") or [])
    busy = (
        f"; {left_out} repeat(s) of steps left out of the time lane as disturbed by other "
        "work on the host (a - in its tables is a step with no undisturbed repeat; the "
        "run's report.md lists them)"
        if left_out
        else ""
    )
    return f"judged: {judged}" + (f"; {why}" if why else "") + busy


def _sizes(study: Study, run: RunView | None) -> list[str]:
    out = ["### Sizes", ""]
    if run is None:
        for scale in study.scale_names:
            sizes = sizes_of(study.template_at(scale))
            out += [f"`--scale {scale}`:", "", *_sizes_table(sizes)]
        return out
    if run.study is not None:
        sizes = run.study["sizes"]
    else:
        sizes = sizes_of(run.lab or study.lab)
        out += [f"Note: {run.lab_note}.", ""] if run.lab_note else []
    return out + _sizes_table(sizes)


def _sizes_table(sizes: dict[str, StudySizes]) -> list[str]:
    rows = [
        [
            name,
            s["benchmark"],
            str(len(s["columns"])),
            s["repeats"],
            s["schedule"],
            ", ".join(f"{k} {_number(v)}" for k, v in s["sizes"].items() if v is not None),
            ", ".join(s["steps"]),
        ]
        for name, s in sizes.items()
    ]
    head = ["comparison", "benchmark", "columns", "repeats", "schedule", "sizes", "steps"]
    return table(head, [[cell(c) for c in r] for r in rows])


def _number(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,}" if float(value).is_integer() and abs(value) >= 10_000 else f"{value:g}"


def _differences(study: Study) -> list[str]:
    if not study.differences:
        return []
    items = [f"- {cell(d)}" for d in study.differences]
    return ["### What differs from the seed", "", *items, ""]


def _steps(comp: Comparison) -> list[str]:
    return [p.name for p in benchmarks.plans(comp) if p.reported]


def _comparison_head(
    study: Study, comp: Comparison, labels: list[str], run: RunView | None
) -> list[str]:
    builds = column_builds(study.lab_data)
    ran = {c["label"]: c for c in run.record.get("columns", [])} if run is not None else {}
    hidden = machine_values(study, run) if run is not None else {}
    known = {c.label: c for c in comp.columns}
    rows = []
    for label in labels:
        col, other = known.get(label), ran.get(label)
        if other is not None:  # the column as the run ran it, not as the study writes it
            build, config, set_ = (
                _hide_paths(scrub(other["build"], hidden)),
                other["config"],
                other["settings"],
            )
        else:
            build = builds.get(label, "?")
            config, set_ = (col.config, col.settings) if col else ("?", {})
        settings = ", ".join(f"{k}={v}" for k, v in set_.items())
        rows.append([label, f"`{build}`", config, settings or "-"])
    head = [f"## {comp.name}: {comp.benchmark}, base {labels[0] if labels else '?'}", ""]
    return head + table(
        ["column", "build", "config", "settings"], [[cell(c) for c in r] for r in rows]
    )


def _hide_paths(build: str) -> str:
    """A run's build string with any absolute path its params do not account for (a run
    of another lab, or made elsewhere) shown as `{path}`."""
    return ABSOLUTE.sub("{path}", build)


def _comparison(
    study: Study, run: RunView, comp: Comparison, steps: Mapping[Key, StepVerdictJson]
) -> list[str]:
    entry = next((c for c in run.record["comparisons"] if c["name"] == comp.name), None)
    if entry is None:
        head = _comparison_head(study, comp, [c.label for c in comp.columns], None)
        return [*head, f"Not in run `{run.record['run_id']}`: its claims are not measured.", ""]
    labels = entry["labels"]
    out = _comparison_head(study, comp, labels, run)
    names = _run_steps(run, comp)
    out += _not_as_the_study(run, comp, labels, names)
    band = run.verdicts["policy"]["band"]
    rows = [
        [s, "1 (base)", *(_time(steps.get((comp.name, lb, s))) for lb in labels[1:])] for s in names
    ]
    out += [f"### {comp.name}: time lane, relative QPS (column / {labels[0]})", ""]
    out += table(["step", *labels], rows)
    out += [
        "Relative QPS over the repeats, above 1 faster, with the report's verdict: (+) faster "
        "and (-) slower are confirmed at the lab's false-alarm rate, = the same within "
        f"±{band:.0%}, ? undecided (docs/verdicts.md). Intervals: the agreement table below "
        "and the run's report.md.",
        "",
    ]
    return out + _cost_tables(run, comp.name, labels, names, steps)


def _not_as_the_study(
    run: RunView, comp: Comparison, labels: list[str], names: list[str]
) -> list[str]:
    """What of the study's comparison the run did not have: another base (then no
    claim of it is measured: ours are against the run's base), columns, steps."""
    said = []
    base = comp.columns[0].label
    if labels and labels[0] != base:
        said.append(
            f"its base is {labels[0]}, not the study's {base}: the figures below are "
            f"against {labels[0]}, and no claim of {comp.name} is measured"
        )
    columns = [c.label for c in comp.columns if c.label not in labels]
    if columns:
        said.append(f"it has no column {', '.join(columns)}")
    missing = [s for s in _steps(comp) if s not in names]
    if missing:
        said.append(f"it reports no step {', '.join(missing)}")
    if not said:
        return []
    return [f"Run `{run.record['run_id']}` is not the study's lab here: {'; '.join(said)}.", ""]


def claimed(study: Study, run: RunView) -> dict[Key, StepVerdictJson]:
    """The run's step verdicts a claim may be set against: those of each comparison
    whose base is the study's (a claim's base is its comparison's first column)."""
    own = {c.name: c.columns[0].label for c in study.lab.comparisons}
    moved = {c["name"] for c in run.verdicts["comparisons"] if own.get(c["name"]) != c["base"]}
    return {k: v for k, v in index(run.verdicts).items() if k[0] not in moved}


def _run_steps(run: RunView, comp: Comparison) -> list[str]:
    """The comparison's reported steps as the run's lab had them (else the study's)."""
    if run.lab is not None:
        for ran in run.lab.comparisons:
            if ran.name == comp.name:
                return _steps(ran)
    return _steps(comp)


def _time(step: StepVerdictJson | None) -> str:
    figure = time_figure(step)
    return figure.text(2, interval=False) if figure is not None else "-"


def _cost_tables(
    run: RunView,
    name: str,
    labels: list[str],
    names: list[str],
    steps: Mapping[Key, StepVerdictJson],
) -> list[str]:
    if run.verdicts.get("cost_lane") is None:
        lanes = run.verdicts.get("lanes")
        why = lanes["not_judged"].get("cost", "not run") if lanes else "not run"
        return [f"No cost lane in this run: {why}.", ""]
    band = run.verdicts["policy"].get("cost_band", 0.01)
    out: list[str] = []
    for metric, title in COST_TABLES:
        rows = []
        for s in names:
            figures = [cost_figure(steps.get((name, lb, s)), metric) for lb in labels[1:]]
            rows.append(
                [s, "1 (base)", *(f.text(3, interval=False) if f else "-" for f in figures)]
            )
        out += [f"### {name}: cost lane, {title} per operation (column / {labels[0]})", ""]
        out += table(["step", *labels], rows)
    out += [
        "Counted under valgrind in the counting replays, column over base, above 1 more work "
        f"per operation: (-) slower is more work, (+) faster less, = the same within ±{band:.0%}, "
        "small: inside the band but beyond the small-change floor (docs/ledger.md); - not "
        "counted.",
        "",
    ]
    return out


def write(study: Study, run: RunView | None, path: Path) -> str:
    """Writes the page to `path` (its folder made); returns its text."""
    text = render(study, run)
    write_atomic(path, text)
    return text
