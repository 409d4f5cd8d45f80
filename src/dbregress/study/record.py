"""What a study run leaves in its run folder (study.json: how it was asked for, when,
for how long, at what sizes), and a run folder read back for a study's page: run.json,
verdicts.json (the report's verdicts, never judged anew here), study.json where `study
run` made it, and the lab as it ran. Also what of this machine a page must not show."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from dbregress.lab.file import Lab, parse_lab
from dbregress.model.errors import LabError, StoreError
from dbregress.shapes.run import RunJson
from dbregress.shapes.study import StudyRunJson, StudySizes
from dbregress.shapes.verdicts import Verdicts
from dbregress.store.files import write_json
from dbregress.store.run import read_record
from dbregress.study.file import Study
from dbregress.study.render import PLACEHOLDER, column_builds

RECORD = "study.json"


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def sizes_of(lab: Lab) -> dict[str, StudySizes]:
    """Per comparison: its benchmark, columns, repeats, schedule, sizes and steps."""
    out: dict[str, StudySizes] = {}
    for comp in lab.comparisons:
        sizes = dataclasses.asdict(comp.sizes)
        steps = [str(s) for s in sizes.pop("steps", ())]
        out[comp.name] = {
            "benchmark": comp.benchmark,
            "columns": [c.label for c in comp.columns],
            "repeats": str(lab.repeats),
            "schedule": lab.schedule,
            "sizes": sizes,
            "steps": steps,
        }
    return out


def start(
    path: Path, study: Study, lab: Lab, argv: list[str], params: dict[str, str], scale: str
) -> StudyRunJson:
    """study.json at the start of the run, in its folder."""
    record: StudyRunJson = {
        "kind": "study-run",
        "format": 1,
        "study": study.name,
        "seed": study.seed,
        "command": argv,
        "params": params,
        "scale": scale,
        "started_at": now_iso(),
        "finished_at": None,
        "wall_s": None,
        "host": read_record(path).get("host", {}),
        "sizes": sizes_of(lab),
    }
    write_json(path / RECORD, record)
    return record


def finish(path: Path, record: StudyRunJson, wall_s: float) -> StudyRunJson:
    """study.json once the run's report is written: its end and wall time."""
    done: StudyRunJson = {**record, "finished_at": now_iso(), "wall_s": round(wall_s, 1)}
    write_json(path / RECORD, done)
    return done


def read_study_record(path: Path) -> StudyRunJson | None:
    file = path / RECORD
    if not file.is_file():
        return None
    try:
        found = json.loads(file.read_text())
    except (OSError, ValueError) as e:
        raise StoreError(f"{file}: not readable as a study record ({e})") from e
    if not isinstance(found, dict) or found.get("kind") != "study-run":
        raise StoreError(f"{file}: not a study record (no kind study-run)")
    return cast(StudyRunJson, found)


@dataclass(frozen=True)
class RunView:
    """A run folder as a study's page reads it."""

    path: Path
    record: RunJson
    verdicts: Verdicts
    study: StudyRunJson | None
    lab: Lab | None  # the lab as it ran (its lab.toml); None: see lab_note
    lab_note: str | None


def read_view(path: Path) -> RunView:
    """A run folder with its verdicts.json (the caller makes sure it is written)."""
    record = read_record(path)
    file = path / "verdicts.json"
    try:
        verdicts = cast(Verdicts, json.loads(file.read_text()))
    except (OSError, ValueError) as e:
        raise StoreError(f"{file}: cannot read the run's verdicts ({e})") from e
    lab, note = None, None
    lab_file = path / "lab.toml"
    try:
        text = lab_file.read_text()
        lab = parse_lab(tomllib.loads(text), lab_file, text)
    except (OSError, LabError, tomllib.TOMLDecodeError) as e:
        note = (
            f"the run's lab.toml could not be read ({type(e).__name__}): sizes from the study's lab"
        )
    return RunView(path, record, verdicts, read_study_record(path), lab, note)


def machine_values(study: Study, run: RunView | None) -> dict[str, str]:
    """Text of this machine a page must not show -> what stands for it: each param's
    value (as given, and as the run's builds resolved it) -> `{name}`; the results
    folder, the working directory and the home directory."""
    out: dict[str, str] = {}
    if run is not None:
        given = run.study["params"] if run.study is not None else {}
        for name, value in given.items():
            out[value] = f"{{{name}}}"
        templates = column_builds(study.lab_data)
        for column in run.record.get("columns", []):
            template = templates.get(column["label"])
            if template is not None:
                out |= _inferred(template, column["build"])
        out[str(run.path.resolve().parent)] = "RESULTS"
    out[os.getcwd()] = "."
    home = str(Path.home())
    if len(home) > 1:
        out[home] = "~"
    return {k: v for k, v in out.items() if len(k) > 1}


def _inferred(template: str, build: str) -> dict[str, str]:
    """A param's value as a run's build string holds it, found by its template."""
    pattern, seen, last = "", set[str](), 0
    for m in PLACEHOLDER.finditer(template):
        pattern += re.escape(template[last : m.start()])
        pattern += f"(?P={m[1]})" if m[1] in seen else f"(?P<{m[1]}>.+?)"
        seen.add(m[1])
        last = m.end()
    if not seen:
        return {}
    found = re.fullmatch(pattern + re.escape(template[last:]), build)
    if found is None:
        return {}
    return {value: f"{{{name}}}" for name, value in found.groupdict().items() if value}


def scrub(text: str, values: dict[str, str]) -> str:
    """`text` with each of this machine's values replaced, the longest first."""
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, values[value])
    return text
