"""verdicts.json (schema/verdicts.schema.json): `Verdicts`, and its parts, as the
analysis writes them and every report and gate reads them."""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict

from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.replay import ReplayWindow

# A verdict's word: of the time and cost lanes (QPS: slower is worse; estimated cycles:
# slower is more work), and of a per-operation metric, which says only which way it moved.
VerdictWord: TypeAlias = Literal["slower", "faster", "same", "undecided"]
MetricWord: TypeAlias = Literal["higher", "lower", "same", "undecided"]
Lane: TypeAlias = Literal["time", "cost"]


class PolicyJson(TypedDict):
    alpha: float
    band: float
    cost_band: NotRequired[float]
    cost_small_floor: NotRequired[float]


class Lanes(TypedDict):
    judged: list[Lane]
    not_judged: dict[str, str]


class BaselineFigures(TypedDict):
    iops: float
    latency_us: float
    user_us_per_read: float
    system_us_per_read: float
    # per device read; None where none reached it or a buffered run's were not counted
    device_us: float | None
    device_flag: str | None  # why device_us is not usable (at or below zero, absent)
    device_iops: float | None  # fio's device reads per second (iops with O_DIRECT)
    page_cache_hit_rate: float | None  # a buffered run's share of reads the cache served


class BaselineJson(TypedDict):
    fio_version: str | None
    device: str | None
    block_size: int
    direct: bool
    numjobs: int
    command: list[str]
    files: list[str]
    before: BaselineFigures | None
    after: BaselineFigures | None
    drift: float | None
    absent: str | None
    device_flag: str | None  # why the model has no device time (a run's is flagged)


class IoRowJson(TypedDict):
    step: str
    column: str
    repeats: int
    clients: int
    reads_per_op: float
    kib_per_read: float
    read_iops: float
    fio_iops: float  # fio's device reads per second
    io_efficiency: float | None  # None: see no_efficiency
    predicted_io_efficiency: float | None
    user_us_per_read: float
    system_us_per_read: float
    user_us_per_op: float
    system_us_per_op: float
    device_us: float | None  # None: see device_flag
    predicted_us_per_op: float | None
    measured_us_per_op: float
    timed_us_per_op: float | None
    difference_us: float | None
    difference_pct: float | None
    own_read_share: float | None
    buffered: bool
    file_reads_per_op: float | None  # the engine's reads of its files (buffered reads)
    page_cache_hit_rate: float | None  # the engine's: 1 - device reads / file reads
    fio_page_cache_hit_rate: float | None
    no_efficiency: str | None  # why io_efficiency is None
    device_flag: str | None  # why device_us and the model's figures are None


class AbsentItem(TypedDict):
    step: str
    column: str | None
    why: str


class IoEfficiencyItem(TypedDict):
    comparison: str
    why_not: str | None
    baseline: BaselineJson | None
    rows: list[IoRowJson]
    absent: list[AbsentItem]


class DisturbedItem(TypedDict):
    column: str
    repeat: int
    step: str
    why: str


class CostLaneNote(TypedDict):
    band: float
    replays_per_column: int
    method: str


Ratio: TypeAlias = float | None


CiItem: TypeAlias = float


Ci: TypeAlias = list[CiItem] | None


class RepeatCounts(TypedDict):
    base: int
    column: int


class MetricVerdict(TypedDict):
    ratio: Ratio
    ci: Ci
    verdict: MetricWord
    unit: NotRequired[str]
    better: NotRequired[Literal["higher", "lower"]]


class Replays(TypedDict):
    base: int
    column: int


class CountVerdict(TypedDict):
    ratio: Ratio
    ci: Ci
    verdict: VerdictWord
    replays: Replays
    base: NotRequired[float | None]
    value: NotRequired[float | None]
    unit: str
    spread: NotRequired[float]


class BackgroundEstimatedCycles(TypedDict):
    base: NotRequired[float | None]
    column: NotRequired[float | None]


class FloorSource(TypedDict):
    """What one measured floor (the A/A calibration, the history) held for a step: its
    sd of log counts (None: none), the runs that measured it, and why there is none."""

    sd: float | None
    runs: list[str]
    note: str | None


Noise = TypedDict(
    "Noise",
    {
        "sd": NotRequired[float | None],
        "from": NotRequired[str | None],
        "calibration": NotRequired[FloorSource],
        "history": NotRequired[FloorSource],
        # replays of the step left out: counted by another method or scope
        "left_out": NotRequired[str | None],
    },
)


class BaseState(TypedDict):
    counted: NotRequired[float | None]  # hit rate, mean over the replays
    timed: NotRequired[float | None]
    mismatch: NotRequired[str | None]
    kind: NotRequired[str]  # rocksdb | postgres | innodb (analysis/state.py)
    counted_misses_per_op: NotRequired[float | None]
    timed_misses_per_op: NotRequired[float | None]
    tolerance_misses_per_op: NotRequired[float | None]
    replays: NotRequired[int]


class ColumnState(TypedDict):
    counted: NotRequired[float | None]
    timed: NotRequired[float | None]
    mismatch: NotRequired[str | None]
    kind: NotRequired[str]
    counted_misses_per_op: NotRequired[float | None]
    timed_misses_per_op: NotRequired[float | None]
    tolerance_misses_per_op: NotRequired[float | None]
    replays: NotRequired[int]


class State(TypedDict):
    base: NotRequired[BaseState | None]
    column: NotRequired[ColumnState | None]


class CostVerdict(TypedDict):
    metric: Literal["estimated_cycles"]
    ratio: Ratio
    ci: Ci
    verdict: VerdictWord
    replays: Replays
    p_value: NotRequired[float | None]
    reason: NotRequired[str]
    reading: NotRequired[str | None]
    counts: NotRequired[dict[str, CountVerdict]]
    background_estimated_cycles: NotRequired[BackgroundEstimatedCycles]
    noise: NotRequired[Noise]
    state: NotRequired[State]
    # a `same` verdict whose interval clears the small-change floor (docs/ledger.md):
    # `size` is ratio - 1, `small_floor` the margin (a fraction) its interval cleared
    small: NotRequired[bool]
    size: NotRequired[float | None]
    small_floor: NotRequired[float | None]


class StepVerdictJson(TypedDict):
    step: str
    ratio: Ratio
    ci: Ci
    ci_confidence: NotRequired[float | None]
    verdict: VerdictWord
    p_value: NotRequired[float | None]
    repeats: RepeatCounts
    more_repeats: NotRequired[int | None]
    reason: NotRequired[str]
    metrics: dict[str, MetricVerdict]
    cost: NotRequired[CostVerdict | None]
    lane: NotRequired[Literal["time"]]


class VerdictColumn(TypedDict):
    label: str
    steps: list[StepVerdictJson]


class CountingStep(TypedDict):
    adjustments: list[str]  # lockstep, settled, paced_on_query_thread
    windows: dict[str, ReplayWindow]  # column label -> its counted window


class CountingReplays(TypedDict):
    """What a comparison's counting replays changed, from cost/lane.json
    (report/disclosure.py); `recorded` False with `note` saying what is missing."""

    recorded: bool
    profile: str | None
    note: str | None
    settings: dict[str, dict[str, str]]  # column label -> engine setting -> value
    held: dict[str, str]  # column label -> what its replays hold off the windows
    steps: dict[str, CountingStep]
    lines: list[str]  # the same in words, as report.md gives them


class VerdictComparison(TypedDict):
    name: str
    benchmark: NotRequired[str]
    base: str
    columns: list[VerdictColumn]
    # the cost lane's replays: what they changed (None: the run has no counting replays)
    counting_replays: NotRequired[CountingReplays | None]


class Verdicts(TypedDict):
    format_version: Literal[1]
    run_id: str
    lab: NotRequired[str]
    status: NotRequired[str]
    method: NotRequired[str]
    policy: PolicyJson
    lanes: NotRequired[Lanes]
    # run.json's method identity as the run stored it (dbregress/method/identity.py): every
    # field a version or a hash, None where the host had no such tool
    method_identity: NotRequired[MethodIdentity | None]
    io_efficiency: NotRequired[list[IoEfficiencyItem]]
    comparisons: list[VerdictComparison]
    disturbed: NotRequired[list[DisturbedItem]]
    cost_lane: NotRequired[CostLaneNote | None]


# `dbregress ledger --format json` (report/ledger.py, docs/ledger.md), format 1: a
# change (later over earlier) with its interval and class.
class LedgerFunctionJson(TypedDict):
    function: str  # "name (object file)"
    base: float | None  # instructions per operation (None: not among the costliest 300)
    value: float | None
    share: float | None  # of the step's change in instructions per operation


LedgerCellJson = TypedDict(
    "LedgerCellJson",
    {
        "ratio": float | None,
        "ci": list[float] | None,
        "class": str,
        # an increment that moved: where (analysis/functions_moved.py)
        "functions": NotRequired[list[LedgerFunctionJson]],
    },
)


class LedgerPointJson(TypedDict):
    run: str
    column: str
    build: str
    commit: str | None
    subject: str | None
    cumulative: LedgerCellJson | None  # from the first point (None: it is the first)
    increment: LedgerCellJson | None  # over the point before


class LedgerStepJson(TypedDict):
    comparison: str
    step: str
    lane: str  # cost | time
    metric: str
    points: list[LedgerPointJson]
    total: LedgerCellJson | None
    product_of_increments: float | None
    remainder: float | None  # total / product - 1


class LedgerReferenceJson(TypedDict):
    run: str
    column: str
    build: str


class LedgerContributorJson(TypedDict):
    run: str
    column: str
    commit: str | None
    ratio: float | None


class LedgerDriftItemJson(TypedDict):
    comparison: str
    step: str
    column: str  # the point beyond the limit (a lab's: its newest)
    run: str
    ratio: float | None
    ci: list[float]
    contributors: list[LedgerContributorJson]


class LedgerDriftJson(TypedDict):
    limit: float | None
    beyond: list[LedgerDriftItemJson]


class LedgerJson(TypedDict):
    format: int
    lab: str
    reference: LedgerReferenceJson | None
    steps: list[LedgerStepJson]
    notes: list[str]
    drift: LedgerDriftJson
