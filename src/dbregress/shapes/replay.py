"""A run's cost lane as stored: cost/<column>/r<N>.json, one counting replay
(`ReplayRecord`: what it counted of each step, or why it failed), and cost/lane.json,
how the lane counted (`CostLaneRecord`)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from dbregress.shapes.explain import EngineState
from dbregress.shapes.method import MethodIdentity


class ReplayStep(TypedDict):
    """What a replay keeps of a counted window's figures (shapes/explain.py
    CountFigures): of its function table, the costliest functions only."""

    index: int
    unit: str
    ops: int
    rows: int
    divisor: float
    skip_ops: int
    files: int
    scope: str
    caches: dict[str, str]
    wall_s: float
    objects: dict[str, float]  # instructions per operation by object file
    engine_state: NotRequired[EngineState]
    state_mismatch: NotRequired[str | None]
    per_op: dict[str, float]
    # the step as counted (method.step_key): with the build and the counting method, the
    # key of the history floor; absent in replays counted before it was recorded
    spec: NotRequired[str]
    background_per_op: NotRequired[dict[str, float]]
    client_per_op: NotRequired[dict[str, float]]  # an embedded engine's
    # the costliest functions' instructions per operation, "name (object file)": where
    # a change moved (absent in replays counted before they were kept)
    functions: NotRequired[dict[str, float]]


class ReplayError(TypedDict):
    type: str
    message: str
    traceback: NotRequired[str]
    bug: NotRequired[bool]  # True: a bug in dbregress (errors.is_bug): exit 3, not 2


class ReplayRecord(TypedDict):
    """One counting replay of a column: `status` "ok" with its `steps`, or "failed"
    with its `error` (and no steps)."""

    schema_version: NotRequired[int]  # added where it is stored
    kind: NotRequired[Literal["cost-replay"]]  # added where it is stored
    comparison: str
    column: str
    replay: int
    build: str
    # the counted build's identity where it was counted (absent in replays counted
    # before dbregress kept it): the count store keys the replay by it
    build_identity: NotRequired[dict[str, str]]
    method_identity: NotRequired[MethodIdentity]  # absent: the task itself failed
    counts_only: NotRequired[list[str]]  # an added replay: the steps it counts
    status: Literal["ok", "failed"]
    error: NotRequired[ReplayError]
    steps: dict[str, ReplayStep]
    took_s: float
    host: NotRequired[str]  # the fleet worker that counted it
    # the engine sizes it ran with (engines/base.py Sizes: a fleet worker's from its own
    # memory); the count store keys the replay by them (absent: the run's host's)
    engine_sizes: NotRequired[EngineSizes]
    reused: NotRequired[ReusedFrom]  # taken from the count store: where it was counted


class EngineSizes(TypedDict):
    """engines/base.py Sizes as a record holds them."""

    cache_mb: int
    wal_mb: int
    data_mb: int


class ReusedFrom(TypedDict):
    """Where a replay taken from the count store (store/counted.py) was counted."""

    entry: str  # the store's entry: KEY/FILE
    run: str | None
    column: str | None
    replay: int | None
    stored_at: float


class StoreUse(TypedDict):
    """cost/lane.json `store`: the count store the lane used and what it took."""

    path: str
    recount: bool  # the lab or --recount said to take nothing from it
    adopted: dict[str, int]  # comparison -> stored replays at the windows it adopted
    refused: dict[str, str]  # comparison or column -> why stored replays were not taken
    # column -> its ok replays counted in this run (fresh) and taken from the store;
    # absent in lanes recorded before they were kept
    fresh: NotRequired[dict[str, int]]
    taken: NotRequired[dict[str, int]]
    recount_every: NotRequired[int]  # the lab's: a reused build counts anew this often


class CyclesModel(TypedDict):
    l1: int
    ll: int
    ram: int


class ReplayWindow(TypedDict):
    """A counted step's window as a column's replays were told it (prepare.Window):
    `ops` Q calls counted after `skip_ops`, the last `warm_ops` of those instrumented;
    `until_hit_rate`: it opens earlier, as soon as the engine's block cache hits this
    often (None: it opens at skip_ops); paced writers at `q_per_s` per Q call."""

    skip_ops: int
    ops: int
    warm_ops: int
    q_per_s: float
    until_hit_rate: float | None


class StepChanges(TypedDict):
    """What the counting replays change in one counted step: `adjustments` (lockstep,
    settled, paced_on_query_thread) and each column's window."""

    adjustments: list[str]
    windows: dict[str, ReplayWindow]  # column label -> its window


class ComparisonChanges(TypedDict):
    """What the counting replays of one comparison changed: per column, the engine
    settings they set that its own settings do not (the InnoDB buffer pool cap
    included), what they hold off the windows; per counted step, its adjustments."""

    settings: dict[str, dict[str, str]]
    held: dict[str, str]
    steps: dict[str, StepChanges]


class ReplayChanges(TypedDict):
    """cost/lane.json's `replay_changes` (explain/replay_changes.py): the counting-replay
    profile, the lane's window sizing and each comparison's changes."""

    profile: str
    sizing: dict[str, float | int | bool | None]
    comparisons: dict[str, ComparisonChanges]


class CostLaneRecord(TypedDict, total=False):
    """cost/lane.json: how a run's cost lane counted (the lane writes every key; a lane
    an earlier dbregress stored may lack the later ones, so readers take each with a
    default)."""

    schema_version: int  # added where the record is stored
    kind: Literal["cost-lane"]
    took_s: float
    workers: int
    replays_per_column: int
    replays_max: int
    valgrind: str  # valgrind --version
    method: str
    caches: list[str]  # the cache simulation's options
    cycles_model: CyclesModel  # cycles per miss at each cache level
    replay_settings: dict[str, dict[str, str]]  # engine family -> setting -> value
    lockstep_steps: list[str]
    replay_changes: ReplayChanges  # what the replays changed, read by the reports
    skipped: dict[str, str]  # comparison/step -> why it was not counted
    store: StoreUse
