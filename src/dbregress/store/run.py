"""Writing and reading one run folder.

results/<run id>/
  run.json                  what was run: lab, columns, builds, host, placement, status
  lab.toml                  the lab file as given
  <label>/r<repeat>/        one job: server.log, loadgen stderr, spec and result per step
    steps/NN-<step>.json    StepResult, schema-versioned, written when the step ends
    steps/NN-<step>.csv     per-second series
    steps/NN-<step>.hlog    HdrHistogram log (V2, base64), one line per op kind
    steps/NN-<step>.spec.json, .stderr   what the loadgen was told, and said on stderr
  device/<comparison>-<before|after>.fio.json   fio's output beside an IO-bound comparison
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from dbregress.lab.file import Job, Lab
from dbregress.method import identity as method
from dbregress.model.errors import BuildMoved, StoreError, is_bug
from dbregress.model.records import JobId, NotAStepResult, StepResult
from dbregress.model.run_record import SCHEMA_VERSION, RunRecord, Status, check_run, upgrade_run
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.run import (
    BuildIdentity,
    ComparisonEntry,
    Failure,
    HostFacts,
    JobEntry,
    JobStatus,
    RunJson,
)
from dbregress.shapes.step_result import StepResultJson
from dbregress.store.build_names import VOLATILE, build_key
from dbregress.store.files import sibling, write_atomic, write_json

ENDED = ("ok", "failed")  # a job's status once it ran to its end; else "running"


def new_run_id(lab_name: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{lab_name}"


class RunWriter:
    record: RunJson  # run.json as it is written
    # a resumed run's builds as its finished jobs measured them (reopen): none in a new run
    begun_with: Mapping[str, BuildIdentity] = MappingProxyType({})

    def __init__(self, root: Path, lab: Lab, host: dict[str, object]) -> None:
        run_id = new_run_id(lab.name)
        path = root / run_id
        suffix = 1
        while path.exists():
            suffix += 1
            path = root / f"{run_id}-{suffix}"
        path.mkdir(parents=True)
        path.chmod(0o755)
        self.path = path
        self.record = {
            **RunRecord(
                run_id=path.name,
                lab=lab.name,
                comparisons=[
                    {
                        "name": comp.name,
                        "benchmark": comp.benchmark,
                        "labels": [c.label for c in comp.columns],
                    }
                    for comp in lab.comparisons
                ],
                started_at=_now(),
                # what collect/host.py found, kept as it is
                host=cast(HostFacts, host),
                placement=lab.placement.to_json(),
                columns=[
                    {
                        "label": c.label,
                        "comparison": comp.name,
                        "build": str(c.build),
                        "config": c.config,
                        "settings": c.settings,
                        "base": i == 0,
                    }
                    for comp in lab.comparisons
                    for i, c in enumerate(comp.columns)
                ],
                repeats={"min": lab.repeats.minimum, "max": lab.repeats.maximum},
                order=lab.order,
                schedule=lab.schedule,
                slice_ms=lab.slice_ms,
                seed=lab.seed,
                warmup_job=lab.warmup_job,
                verdict_policy=lab.policy_record(),
                # Which lanes this run has, and why not the cost lane when it has none: a
                # gate on a lane that never ran fails instead of passing.
                cost_lane={"planned": lab.counts(), "why_not": lab.why_no_count()},
                # How it is measured (dbregress, loadgen, valgrind, libc, cost model, ...):
                # the history draws a boundary where this changes (dbregress/method/identity.py).
                method_identity=method.identity(),
                inject_slowdown={
                    c.label: c.inject_slowdown for c in lab.columns if c.inject_slowdown
                },
            ).to_json()
        }
        write_atomic(path / "lab.toml", lab.text)
        self._save()

    @classmethod
    def reopen(cls, path: Path, lab: Lab, current: MethodIdentity | None = None) -> RunWriter:
        """An interrupted run folder, to be continued by the same lab, measured by the
        same method (`current`: this process's identity, method.identity(), unless
        given). A run whose recorded method differs is refused: its repeats and replays
        would pool figures of two methods."""
        record = read_record(path)
        # A run whose jobs all finished may still lack its cost lane (interrupted there).
        lane_done = not lab.counts() or (path / "cost" / "lane.json").is_file()
        if record.get("status") == "ok" and lane_done:
            raise StoreError(f"{path} finished without failures; there is nothing to resume")
        if record.get("lab") != lab.name or (path / "lab.toml").read_text() != lab.text:
            raise StoreError(
                f"{path} was run from another lab file; resume it with its own {path / 'lab.toml'}"
            )
        check_same_method(path, record.get("method_identity"), current or method.identity())
        self = cls.__new__(cls)
        self.path = path
        self.record = record
        # The interrupted attempt's failures go; the jobs that ended keep theirs.
        ended = {name for name, job in record["jobs"].items() if job.get("status") in ENDED}
        record["failures"] = [
            f
            for f in record["failures"]
            if f["type"] != "Interrupted" and f["where"].split(" ")[0] in ended
        ]
        # the builds the finished jobs measured, which the resumed run's must be; a
        # fleet's are each host's own (its compiler, packages), so not compared
        ended_labels = {jid.label for name in ended if (jid := JobId.of(name)) is not None}
        self.begun_with = (
            {}
            if record.get("hosts")
            else {k: v for k, v in record["builds"].items() if k in ended_labels}
        )
        record["status"] = "running"
        record["finished_at"] = None
        record.setdefault("resumed_at", []).append(_now())
        self._save()
        return self

    def job_finished(self, job: Job) -> bool:
        """The job ran to its end before (ok, or failed and recorded): a resumed run
        keeps it."""
        return self.record["jobs"].get(job.name, {}).get("status") in ENDED

    def forget_job(self, job: Job) -> None:
        """Remove what an interrupted attempt of the job left, before it runs again."""
        d = self.path / job.column.label / f"r{job.repeat}"
        if job.name in self.record["jobs"] or d.exists():
            shutil.rmtree(d, ignore_errors=True)
            self.record["jobs"].pop(job.name, None)
            self._save()

    def job_failed_by_interrupt(self, job: Job) -> bool:
        """An interrupt is already recorded for one of the job's steps."""
        return any(
            f["type"] == "Interrupted" and f["where"].split(" ")[0] == job.name
            for f in self.record["failures"]
        )

    def end_job(self, job: Job, status: str) -> None:
        self.record["jobs"].setdefault(job.name, {})["status"] = cast(JobStatus, status)
        self._save()

    def has_round(self, comparison: str, number: int) -> bool:
        return any(
            r["comparison"] == comparison and r["round"] == number for r in self.record["rounds"]
        )

    def job_dir(self, job: Job) -> Path:
        d = self.path / job.column.label / f"r{job.repeat}"
        (d / "steps").mkdir(parents=True, exist_ok=True)
        return d

    def set_build(self, label: str, identity: BuildIdentity) -> None:
        """The build of column `label`. A resumed run refuses another build under the
        label than the one its finished jobs measured (begun_with): two builds' figures
        are never pooled in one column."""
        before = self.begun_with.get(label)
        if before is not None and build_key(before) != build_key(identity):
            differs = sorted(
                k
                for k in set(before) | set(identity)
                if k not in VOLATILE and before.get(k) != identity.get(k)
            )
            said = "; ".join(f"{k} {before.get(k)!r} -> {identity.get(k)!r}" for k in differs)
            raise BuildMoved(
                f"{self.path}: {label} is another build than the one its finished jobs "
                f"measured ({said or 'its identity differs'}): start a new run"
            )
        self.record["builds"][label] = identity
        self._save()

    def set_record(self, key: str, value: Any) -> None:
        """A top-level entry of run.json (a fleet run's hosts and plan), by name."""
        cast(dict[str, Any], self.record)[key] = value
        self._save()

    def set_job(self, job: Job, info: JobEntry) -> None:
        """The job's entry (a fleet worker's writer passes on its message's)."""
        self.record["jobs"][job.name] = info
        self._save()

    def add_round(self, comparison: str, number: int, order: list[str]) -> None:
        """The columns of one round in the order they run (drawn from the lab's seed)."""
        self.record["rounds"].append({"comparison": comparison, "round": number, "order": order})
        self._save()

    def note_cache_drop(self, failure: str | None) -> None:
        cache = self.record.get("page_cache")
        if cache is None:  # a run recorded before page-cache drops were counted
            cache = self.record["page_cache"] = {"dropped": 0, "failed": None}
        if failure is None:
            cache["dropped"] = cache.get("dropped", 0) + 1
        else:
            cache["failed"] = failure
        self._save()

    def add_failure(self, where: str, error: BaseException, trace: str | None = None) -> None:
        failure: Failure = {"where": where, "type": type(error).__name__, "message": str(error)}
        if trace:
            failure["traceback"] = trace
        if is_bug(error):  # exit 3 wherever the run is judged, never "not judged"
            failure["bug"] = True
        self.add_failure_record(failure)

    def add_failure_record(self, failure: Failure) -> None:
        """A failure as stored (where, type, message, traceback): one a fleet worker
        recorded, received by the coordinator."""
        self.record["failures"].append(failure)
        self._save()

    def forget_failures(self, job_name: str) -> None:
        """Drop the failures recorded for one job (its attempt is run again)."""
        kept = [f for f in self.record["failures"] if f["where"].split(" ")[0] != job_name]
        if len(kept) != len(self.record["failures"]):
            self.record["failures"] = kept
            self._save()

    def write_step(
        self,
        job: Job,
        index: int,
        result: StepResult,
        series: Iterable[Mapping[str, object]],
        hlog: str,
    ) -> Path:
        """The step's files; its result was checked against the schema when it was built."""
        stem = self.job_dir(job) / "steps" / f"{index:02d}-{result.step}"
        write_atomic(sibling(stem, ".csv"), _series_csv(series))
        write_atomic(sibling(stem, ".hlog"), hlog)
        write_json(sibling(stem, ".json"), result.to_json())
        return sibling(stem, ".json")

    def write_file(self, relative: str, value: Any) -> None:
        """A JSON file of the run's own beside its jobs (fio's output: io_baseline.py)."""
        write_json(self.path / relative, value)

    def finish(self, status: str) -> None:
        self.record["status"] = cast(Status, status)
        self.record["finished_at"] = _now()
        self._save()

    def _save(self) -> None:
        check_run(self.record, str(self.path / "run.json"))
        write_json(self.path / "run.json", self.record)


def _series_csv(series: Iterable[Mapping[str, object]]) -> str:
    """steps/NN-<step>.csv: the six columns of each second's row, as the step counted them."""
    cols = ("t_s", "op", "ops", "rows", "max_us", "errors")
    lines = [",".join(cols)]
    for row in series:
        lines.append(",".join(str(row[c]) for c in cols))
    return "\n".join(lines) + "\n"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass(frozen=True)
class RunData:
    """A run as read back: run.json plus every step result, in step order per job."""

    path: Path
    record: RunJson
    steps: dict[str, list[StepResultJson]]  # job name -> step results
    damaged: list[str] = field(default_factory=list)  # step files that could not be read

    @property
    def labels(self) -> list[str]:
        return [c["label"] for c in self.record["columns"]]

    def only_columns(self, wanted: set[str]) -> RunData:
        """The run as if the lab had held only these non-base columns (and their bases);
        comparisons left with no column are dropped."""
        comps: list[ComparisonEntry] = []
        for comp in self.record["comparisons"]:
            base, *others = comp["labels"]
            kept = [lb for lb in others if lb in wanted]
            if kept:
                comps.append({**comp, "labels": [base, *kept]})
        labels = {lb for comp in comps for lb in comp["labels"]}
        record: RunJson = {
            **self.record,
            "comparisons": comps,
            "columns": [c for c in self.record["columns"] if c["label"] in labels],
        }
        steps = {
            j: rs
            for j, rs in self.steps.items()
            if (jid := JobId.of(j)) is not None and jid.label in labels
        }
        return RunData(self.path, record, steps, self.damaged)


class Damaged(StoreError):
    """A result file that is not what any dbregress wrote: truncated, not JSON, edited."""


def _check_version(path: Path, value: dict[str, Any]) -> None:
    version = value.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise Damaged(f"{path} has no results schema version; it was not written by dbregress")
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"{path} has results schema version {version}; this dbregress reads version "
            f"{SCHEMA_VERSION}. Use the dbregress release that wrote it, or rerun the lab."
        )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Damaged(f"{path} is not valid JSON ({e}); truncated, or edited by hand?") from e
    if not isinstance(value, dict):
        raise Damaged(f"{path} does not hold a JSON object")
    _check_version(path, value)
    return value


def read_record(run_dir: Path) -> RunJson:
    """run.json of a run folder, upgraded to this dbregress's fields and checked against
    the run schema (run_record.py); StoreError (Damaged, NotARunRecord) naming the file
    when it is not one."""
    path = run_dir / "run.json"
    record = upgrade_run(_read_json(path))
    check_run(record, str(path))
    return record


def resolve_run(arg: str, root: Path) -> Path:
    """A run folder from a path, a run id under root, or `latest`."""
    if arg == "latest":
        runs = sorted(p for p in root.glob("*/run.json")) if root.is_dir() else []
        if not runs:
            raise StoreError(f"no runs under {root}; run a lab first: dbregress run LAB")
        return max(runs, key=lambda p: p.stat().st_mtime).parent
    for candidate in (Path(arg), root / arg):
        if (candidate / "run.json").is_file():
            return candidate
    raise StoreError(f"{arg!r} is not a run folder (no run.json there or under {root})")


def read_run(path: Path) -> RunData:
    """run.json and every step result of the run. A damaged step file is named in
    `damaged` and left out; a file of another schema version is an error."""
    record = read_record(path)
    steps: dict[str, list[StepResultJson]] = {}
    damaged: list[str] = []
    for job in record["jobs"]:
        files = sorted((path / job / "steps").glob("*.json"))
        steps[job] = []
        for f in files:
            if not f.name[:2].isdigit() or f.name.endswith(".spec.json"):
                continue
            try:
                steps[job].append(_read_step(f))
            except (Damaged, NotAStepResult) as e:
                damaged.append(str(e))
    return RunData(path, record, steps, damaged)


# Step files already checked against the schema, by (path, mtime, size): a run reads its
# results back after every round to decide the next, and checking every file again each
# time cost more than the rest of the scheduler.
_CHECKED: set[tuple[str, int, int]] = set()


def _read_step(f: Path) -> StepResultJson:
    """A stored step result, checked against the schema unless this very file (same
    modification time and size) was checked before."""
    stat = f.stat()
    key = (str(f), stat.st_mtime_ns, stat.st_size)
    value = _read_json(f)
    if key not in _CHECKED:
        StepResult.from_json(value, str(f))  # NotAStepResult when it does not fit
        _CHECKED.add(key)
    return cast(StepResultJson, value)


def check_same_method(path: Path, recorded: MethodIdentity | None, current: MethodIdentity) -> None:
    """Refuse, in one line, to continue a run measured by another method than
    `current` (what differs: dbregress/method/identity.py differences)."""
    if method.key(recorded) == method.key(current):
        return
    what = "; ".join(method.differences(recorded, current))
    raise StoreError(
        f"cannot resume {path}: it was measured by another method ({what}); a run's "
        "figures come from one method, so run its lab again as a new run: "
        f"dbregress run {path / 'lab.toml'}"
    )
