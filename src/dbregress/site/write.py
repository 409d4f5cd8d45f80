"""`dbregress site`: the static site of a results folder, written incrementally.

Layout under OUT (default RESULTS/site):
    index.html                     the labs, each with its last run, open regressions,
                                   what it did not judge, its nights (the nightly
                                   recipe's state file) and a sparkline per step and lane
    site.json                      what was written: the labs, their inputs' digests, files
    LAB/index.html                 the lab's steps, version series and runs
    LAB/moved.html                 what moved: change points, confirmed verdicts, bisections
    LAB/step-COMP-STEP.html        both lanes of a step over the runs
    LAB/series-RUN-COMP.html       a run of three or more columns, relative to the first
    LAB/data/lab.json, LAB/data/step-COMP-STEP.json   the same figures, for other tools

Incremental: a lab whose inputs (its runs in the history, their run.json, verdicts.json,
report.html and explanations, the bisections) are as they were at the last write, and
whose files are all still there, is not read again; any file whose bytes would be the
same is not written again; a file the site wrote before and no longer makes is removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from dbregress.lab.file import VerdictPolicy
from dbregress.model.errors import DbregressError
from dbregress.report import ledger
from dbregress.shapes.site import ManifestLab, SiteManifest
from dbregress.shapes.verdicts import LedgerJson
from dbregress.site import gather, moved, pages
from dbregress.site.model import Bisection, LabData, as_json
from dbregress.store.files import write_atomic
from dbregress.store.history import History, RunInfo, history_path

MANIFEST = "site.json"
FORMAT = 2  # raise when the pages or data change for the same inputs


def code_files() -> list[Path]:
    """The code a lab's pages are made by (docs/site.md, "Incremental"): the site's own
    code and templates, report/svg.py (its charts), the change points' and the
    history's code (analysis/changepoints.py, report/history_moves.py,
    store/history*.py: which runs, levels and change points a page shows), and the
    drift ledger's (report/ledger.py, report/ledger_text.py, analysis/ledger.py)."""
    package = Path(__file__).resolve().parents[1]
    here = package / "site"
    return sorted(
        [
            *here.glob("*.py"),
            *here.glob("templates/*"),
            package / "report" / "svg.py",
            package / "analysis" / "changepoints.py",
            package / "report" / "history_moves.py",
            package / "report" / "ledger.py",
            package / "report" / "ledger_text.py",
            package / "analysis" / "ledger.py",
            *package.glob("store/history*.py"),
        ]
    )


def _own_code(files: Iterable[Path] | None = None) -> str:
    """A digest of `code_files()`: pages made by another version are made again,
    without anyone having to remember to raise FORMAT."""
    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in code_files() if files is None else files:
        h.update(str(f.relative_to(package)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class Written:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    labs_read: list[str] = field(default_factory=list)
    labs_kept: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


class Out:
    """The site folder: writes a file only where its bytes change."""

    def __init__(self, root: Path, done: Written) -> None:
        self.root, self.done = root, done
        self.files: list[str] = []

    def put(self, name: str, text: str) -> None:
        self.files.append(name)
        path = self.root / name
        data = text.encode()
        try:
            if path.stat().st_size == len(data) and path.read_bytes() == data:
                self.done.unchanged.append(name)
                return
        except OSError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
        path.chmod(0o644)  # a site is published: a web server of another user reads it
        self.done.written.append(name)


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "-"
    return f"{st.st_mtime_ns}:{st.st_size}"


def _inputs(
    root: Path, runs: list[RunInfo], bisects: Iterable[Path], samples: str, where: str, code: str
) -> str:
    """A digest of everything a lab's pages are made of: the site's format, where the
    results are from the site (its links), the lab's samples in the history, its runs'
    files and the bisections."""
    h = hashlib.sha256(f"format {FORMAT} {code} {where} {samples}".encode())
    for r in runs:
        folder = root / r.path
        parts = [r.run_id, r.status, str(r.ended), r.path, json.dumps(r.method, sort_keys=True)]
        for name in ("run.json", "verdicts.json", "report.html", "explain/explain.json"):
            parts.append(_stamp(folder / name))
        h.update("\0".join(parts).encode())
    for b in bisects:
        h.update(f"{b}:{_stamp(b)}".encode())
    return h.hexdigest()[:32]


def _dumps(value: Any) -> str:
    """Compact JSON (indenting takes Python's slow encoder: 5x the time on a 500-run lab)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=str) + "\n"


def _ledger(root: Path, lab: str, reference: str, problems: list[str]) -> LedgerJson | None:
    """The lab's drift ledger since the nightly recipe's fixed reference (report/ledger.py,
    the cost lane), or None and a line in `problems`."""
    try:
        return ledger.to_json(ledger.lab_ledger(root, lab, reference))
    except DbregressError as e:
        problems.append(f"the ledger since {reference} could not be made: {e}")
        return None


def _lab_data(
    root: Path, out: Path, history: History, lab: str, every: list[Bisection], ref: str | None
) -> LabData:
    problems: list[str] = []
    runs = history.runs(lab)
    folders = gather.read_runs(root, out, runs, problems)
    policy = VerdictPolicy.of_record({"verdict_policy": runs[-1].policy})
    drawn = gather.charts(history, lab, folders, policy)
    steps = gather.steps(lab, drawn)
    named = {f.info.run_id: c for f in folders if (c := moved.causes(f, problems))}
    pages_of = {(s.comparison, s.step): s.page for s in steps}
    lines = moved.change_lines(steps, folders, named) + moved.verdict_lines(
        folders, pages_of, named
    )
    lines = moved.newest_first(lines)
    mine = {s.step for s in steps}
    engines = {str(c.get("build", "")).split("@", 1)[0] for f in folders for c in f.columns}
    data = LabData(
        lab,
        gather.summaries(folders),
        steps,
        lines,
        [b for b in every if b.step in mine and b.engine in engines],
        moved.version_series(lab, folders),
        problems=problems,
    )
    data.open_regressions = moved.open_regressions(lines, folders, steps)
    data.last_judged = folders[-1].judged
    data.last_undecided = moved.undecided(folders[-1])
    data.last_not_judged = folders[-1].not_judged
    data.ledger = _ledger(root, lab, ref, problems) if ref else None
    return data


def _write_lab(o: Out, data: LabData) -> None:
    base = gather.slug(data.name)
    axis = pages.run_axis(data)
    o.put(f"{base}/index.html", pages.lab_page(data))
    o.put(f"{base}/moved.html", pages.moved_page(data))
    for s in data.steps:
        o.put(s.page, pages.step_page(data, s, axis))
        name = s.page.rsplit("/", 1)[1].removesuffix(".html")
        o.put(f"{base}/data/{name}.json", _dumps(as_json(s)))
    for v in data.series:
        o.put(v.page, pages.series_page(data.name, v))
    if data.ledger is not None:
        o.put(f"{base}/ledger.html", pages.ledger_page(data.name, data.ledger))
        o.put(f"{base}/data/ledger.json", _dumps(data.ledger))
    summary = {
        "lab": data.name,
        "runs": as_json(data.runs),
        "steps": [{"comparison": s.comparison, "step": s.step, "page": s.page} for s in data.steps],
        "moved": as_json(data.moved),
        "open_regressions": as_json(data.open_regressions),
        "bisections": as_json(data.bisections),
        "version_series": as_json(data.series),
        "problems": data.problems,
    }
    o.put(f"{base}/data/lab.json", _dumps(summary))


def _previous(out: Path) -> SiteManifest:
    try:
        value = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    ok = isinstance(value, dict) and value.get("format") == FORMAT
    return cast(SiteManifest, value) if ok else {}


def build_site(root: Path, out: Path) -> Written:
    """Write the site of the results folder `root` into `out`."""
    t0 = time.monotonic()
    done = Written()
    out.mkdir(parents=True, exist_ok=True)
    before = _previous(out)
    kept_labs: dict[str, ManifestLab] = before.get("labs", {})
    bisect_files = moved.bisection_files(root)
    code = _own_code()
    every = moved.bisections(root, done.problems)
    o = Out(out, done)
    where = os.path.relpath(root.resolve(), out.resolve())
    labs: dict[str, ManifestLab] = {}
    entries = []
    state = gather.nightly_state(root, done.problems)
    nights, refs = gather.night_lines(state, root, out), gather.references(state)
    if not history_path(root).is_file() and nights:  # the first nights failed: no run yet
        o.put("index.html", pages.index_page([], every, nights))
        return _finish(out, before, o, where, labs, done, t0)
    with gather.open_history(root) as history:
        for lab in history.labs():
            runs = history.runs(lab)
            if not runs:
                continue
            samples = f"{history.sample_digest(lab)} reference {refs.get(lab)}"
            digest = _inputs(root, runs, bisect_files, samples, where, code)
            old = kept_labs.get(lab)
            if (
                old is not None
                and old.get("inputs") == digest
                and all((out / f).is_file() for f in old.get("files", []))
            ):
                done.labs_kept.append(lab)
                said = old["index"].get("problems")
                done.problems += [f"{lab}: {p}" for p in said] if isinstance(said, list) else []
                o.files += old["files"]
                labs[lab] = old
                entries.append(old["index"])
                continue
            data = _lab_data(root, out, history, lab, every, refs.get(lab))
            start = len(o.files)
            _write_lab(o, data)
            entry = json.loads(json.dumps(pages.index_entry(data), default=as_json))
            labs[lab] = {"inputs": digest, "files": o.files[start:], "index": entry}
            entries.append(entry)
            done.labs_read.append(lab)
            done.problems += [f"{lab}: {p}" for p in data.problems]
    o.put("index.html", pages.index_page(entries, every, nights))
    return _finish(out, before, o, where, labs, done, t0)


def _finish(
    out: Path, before: SiteManifest, o: Out, where: str, labs: dict[str, ManifestLab],
    done: Written,
    t0: float,
) -> Written:  # fmt: skip
    """Remove what the site no longer makes; write its manifest."""
    made = set(o.files)
    for name in before.get("files", []):
        if name not in made and (out / name).is_file():
            (out / name).unlink()
            done.removed.append(name)
    manifest = {"format": FORMAT, "results": where, "labs": labs, "files": sorted(made)}
    write_atomic(out / MANIFEST, _dumps(manifest).encode())
    done.seconds = time.monotonic() - t0
    return done
