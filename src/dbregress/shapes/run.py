"""run.json (schema/run.schema.json) as it is stored: `RunJson`, and its parts. The
record is built by run_record.RunRecord; these are what readers get back."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class Imported(TypedDict):
    kind: str
    files: list[str]
    imported_at: NotRequired[str]


class ComparisonEntry(TypedDict):
    name: str
    benchmark: str
    labels: list[str]


class Placement(TypedDict):
    mode: str
    server_cpus: NotRequired[list[int] | None]
    client_cpus: NotRequired[list[int] | None]


class ColumnEntry(TypedDict):
    label: str
    comparison: str
    build: str
    config: str
    settings: dict[str, Any]
    base: bool


class JobEntry(TypedDict):
    status: NotRequired[Literal["running", "ok", "failed"]]


class Failure(TypedDict):
    where: str
    type: str
    message: str
    traceback: NotRequired[str]


class Repeats(TypedDict):
    min: int | None
    max: int | None


class VerdictPolicy(TypedDict):
    alpha: float
    band: float
    cost_band: NotRequired[float]
    count_replays: NotRequired[int]
    count_replays_max: NotRequired[int]


class CostLane(TypedDict):
    planned: bool
    why_not: str | None


class Round(TypedDict):
    comparison: str
    round: int
    order: list[str]


class PageCache(TypedDict):
    dropped: NotRequired[int]
    failed: NotRequired[str | None]


class RunJson(TypedDict):
    schema_version: Literal[1]
    kind: Literal["run"]
    run_id: str
    lab: str
    imported: NotRequired[Imported]
    comparisons: list[ComparisonEntry]
    started_at: NotRequired[str | None]
    finished_at: NotRequired[str | None]
    resumed_at: NotRequired[list[str]]
    status: Literal["running", "ok", "failed", "interrupted"]
    host: dict[str, Any]
    placement: Placement
    columns: list[ColumnEntry]
    builds: dict[str, dict[str, Any]]
    jobs: dict[str, JobEntry]
    failures: list[Failure]
    repeats: NotRequired[Repeats]
    order: NotRequired[str | None]
    schedule: NotRequired[str | None]
    slice_ms: NotRequired[int | None]
    seed: NotRequired[int | None]
    warmup_job: NotRequired[bool]
    verdict_policy: NotRequired[VerdictPolicy]
    cost_lane: NotRequired[CostLane | None]
    method_identity: NotRequired[dict[str, Any] | None]
    count_identity: NotRequired[dict[str, Any] | None]
    inject_slowdown: NotRequired[dict[str, float]]
    rounds: NotRequired[list[Round]]
    page_cache: NotRequired[PageCache | None]
    device_baseline: NotRequired[dict[str, dict[str, Any]]]
    hosts: NotRequired[dict[str, Any] | list[Any]]
    fleet_plan: NotRequired[dict[str, Any]]
    fleet_store: NotRequired[dict[str, Any]]
    fleet_units: NotRequired[list[Any] | dict[str, Any]]
