"""run.json, the record of one run folder: built in one place, checked against
schema/run.schema.json whenever it is written or read.

A run record is made by `RunRecord(...).to_json()` and nowhere else: `dbregress run`
(store/run.py, from the lab), the importers (imports/common.py, from the files they
read) and a fleet worker's scratch copy (fleet/ship.py, from the coordinator's record).
Every reader gets it through `check_run`, which first upgrades a file written by an
earlier dbregress (fields added since are filled with what their absence meant) and
then checks it, so a reader never meets a record that lacks a field or holds a value
of the wrong type, and a hand-edited or truncated run.json is named instead of read as
something it is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from dbregress.model.errors import StoreError
from dbregress.model.records import schema_validator
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.run import (
    BuildIdentity,
    ColumnEntry,
    ComparisonEntry,
    CostLane,
    HostFacts,
    Imported,
    JobEntry,
    PageCache,
    PlacementJson,
    RepeatsJson,
    RunJson,
    VerdictPolicyJson,
)

SCHEMA_VERSION = 1
RUN_SCHEMA = "run.schema.json"
STATUSES = ("running", "ok", "failed", "interrupted")
Status = Literal["running", "ok", "failed", "interrupted"]

# Fields added to run.json after its first version, and what a record written before
# them meant by not having them: none of them was known, so none is claimed.
ADDED_LATER: dict[str, None] = {
    "schedule": None,  # the jobs schedule (the only one then)
    "slice_ms": None,
    "cost_lane": None,  # unknown: the reports look for cost/lane.json
    "method_identity": None,
}


class NotARunRecord(StoreError):
    """A run.json that does not fit the run schema."""


def check_run(value: Mapping[str, Any], where: str) -> None:
    """NotARunRecord naming the first field of `value` (a record as read, or one being
    written) that does not fit the schema."""
    errors = sorted(
        schema_validator(RUN_SCHEMA).iter_errors(value), key=lambda e: list(e.absolute_path)
    )
    if errors:
        first = errors[0]
        path = ".".join(str(x) for x in first.absolute_path) or "(top)"
        raise NotARunRecord(
            f"{where}: not a run record of schema version {SCHEMA_VERSION} "
            f"({path}: {first.message[:200]})"
        )


def upgrade_run(value: dict[str, Any]) -> RunJson:
    """A record as read (run.json's JSON object), with the fields added since it was
    written filled in (ADDED_LATER); the file is not rewritten. The caller checks the
    result against the schema (check_run) before it reads it as a RunJson."""
    missing = {k: v for k, v in ADDED_LATER.items() if k not in value}
    return cast(RunJson, {**value, **missing} if missing else value)


@dataclass
class RunRecord:
    """The fields of a new run.json (schema/run.schema.json says what each holds)."""

    run_id: str
    lab: str
    comparisons: list[ComparisonEntry]
    columns: list[ColumnEntry]
    placement: PlacementJson
    verdict_policy: VerdictPolicyJson
    cost_lane: CostLane
    status: Status = "running"
    started_at: str | None = None
    finished_at: str | None = None
    host: HostFacts = field(default_factory=lambda: HostFacts())
    builds: dict[str, BuildIdentity] = field(default_factory=dict)
    jobs: dict[str, JobEntry] = field(default_factory=dict)
    repeats: RepeatsJson = field(default_factory=lambda: RepeatsJson(min=None, max=None))
    order: str | None = None
    schedule: str | None = None
    slice_ms: int | None = None
    seed: int | None = None
    warmup_job: bool = False
    method_identity: MethodIdentity | None = None
    inject_slowdown: dict[str, float] = field(default_factory=dict)
    page_cache: PageCache | None = field(default_factory=lambda: PageCache(dropped=0, failed=None))
    imported: Imported | None = None  # an imported run: what it was read from

    def to_json(self) -> RunJson:
        """The record as written, checked; its fields in the order run.json has always
        had them (an imported run has no schedule, slice or method), so it is assembled
        as the JSON object it becomes and read as a RunJson once the schema passed it."""
        value: dict[str, object] = {
            "schema_version": SCHEMA_VERSION,
            "kind": "run",
            "run_id": self.run_id,
            "lab": self.lab,
        }
        if self.imported is not None:
            value["imported"] = self.imported
        value.update(
            comparisons=self.comparisons,
            started_at=self.started_at,
            finished_at=self.finished_at,
            status=self.status,
            host=self.host,
            placement=self.placement,
            columns=self.columns,
            builds=self.builds,
            jobs=self.jobs,
            failures=[],
            repeats=self.repeats,
            order=self.order,
        )
        if self.imported is None:
            value.update(schedule=self.schedule, slice_ms=self.slice_ms)
        value.update(seed=self.seed, warmup_job=self.warmup_job, verdict_policy=self.verdict_policy)
        value["cost_lane"] = self.cost_lane
        if self.imported is None:
            value["method_identity"] = self.method_identity
        value.update(inject_slowdown=self.inject_slowdown, rounds=[], page_cache=self.page_cache)
        check_run(value, f"run {self.run_id}")
        return cast(RunJson, value)
