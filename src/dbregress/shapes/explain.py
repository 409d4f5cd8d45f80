"""explain/explain.json in a run folder (what `dbregress explain` measured) and the
figures of a counted window it is made of, which the cost lane's replays keep a part of
(shapes/replay.py). Per-operation figures are plain `dict[str, float]`: instructions,
simulated cache misses, branches, estimated cycles and, where callgrind collected
them, system calls, each divided by the window's operations."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class FunctionFigures(TypedDict):
    """One function's self cost per operation (by name without parameters, and object)."""

    function: str
    object: str
    instructions: float
    d1_read_misses: float
    ll_read_misses: float
    branch_mispredictions: float


class EntryFigures(TypedDict):
    """An embedded engine's entry point (a C API function the loadgen called)."""

    function: str
    calls_per_op: float
    instructions: float


class CacheStateJson(TypedDict):
    """The engine's cache over a window (analysis/state.py): its hits and misses over
    `ops` of the step's Q units (calls, or rows where the step counts rows)."""

    # what was counted: "rocksdb" (block-cache data blocks), "postgres" (8 KB blocks
    # the sessions' backends read: misses only), "innodb" (buffer-pool pages), "myrocks"
    # (its RocksDB's block-cache data blocks); absent in records made before PostgreSQL
    # and InnoDB were: RocksDB's
    kind: NotRequired[str]
    hits: NotRequired[float | None]  # None: the engine does not count its hits
    misses: NotRequired[float]
    # the same, as RocksDB's records made before `hits` and `misses` had them
    block_cache_data_hits: NotRequired[float]
    block_cache_data_misses: NotRequired[float]
    ops: int
    hit_rate: float | None
    misses_per_op: float | None


class EngineState(TypedDict):
    """The cache's state over the counted and over the timed window, and how far apart
    the two may lie in misses per operation (None until the count is known: the cost
    lane sets it from the replay's own count, analysis/state.py settle)."""

    counted: CacheStateJson
    timed: CacheStateJson | None
    tolerance_misses_per_op: NotRequired[float | None]
    # records made before the tolerance was derived: a fixed one, in hit-rate points
    tolerance: NotRequired[float]


class CountFigures(TypedDict):
    """One counted window's figures (explain/jobs.py figures(), completed by count()).

    With an embedded engine `per_op`, `objects` and `functions` are the engine's calls';
    `client_per_op`, `reentered_per_op`, `nested_per_op` and `entries` say the rest.
    `engine_state` and `state_mismatch` are there where the engine reports its cache."""

    index: int
    unit: str
    ops: int
    rows: int
    divisor: float
    skip_ops: int
    q_per_s: float
    files: int
    caches: dict[str, str]
    per_op: dict[str, float]
    objects: dict[str, float]
    functions: list[FunctionFigures]
    # an embedded engine
    client_per_op: NotRequired[dict[str, float]]
    reentered_per_op: NotRequired[dict[str, float]]
    nested_per_op: NotRequired[dict[str, float]]
    entries: NotRequired[list[EntryFigures]]
    # added once the step has run
    wall_s: NotRequired[float]
    engine_state: NotRequired[EngineState]
    state_mismatch: NotRequired[str | None]
    scope: NotRequired[str]
    background_per_op: NotRequired[dict[str, float]]


class ProfileFigures(TypedDict):
    """What perf sampled over a step's measured window."""

    samples: int
    cpu_s: float
    count: int
    elapsed_s: float
    hz: int
    pmu_per_op: dict[str, float]
    # why the page cache was not dropped as the timed run dropped it (a storage-bound
    # comparison): the profile may have read cached files where the timed run read the device
    cache_not_dropped: NotRequired[str]


class Profiled(ProfileFigures):
    """One step's perf profile as the profiling job returns it: `folded` is the text."""

    folded: str


class ProfileEntry(ProfileFigures):
    """A step's profile as stored: `folded` is the file's path in the run folder, then
    the flame graphs drawn from it (or why none was)."""

    folded: str
    why_no_flame: NotRequired[str]
    flame: NotRequired[str]
    diff: NotRequired[str]


class ExplainEntry(TypedDict):
    """One column's step: its counted window and its profile (None: not profiled)."""

    comparison: str
    step: str
    column: str
    build: str
    embedded: bool
    count: CountFigures
    profile: ProfileEntry | None


class ExplainMethod(TypedDict):
    counts: str
    caches: list[str]
    replay_settings: dict[str, dict[str, str]]
    lockstep_steps: list[str]
    profile: str


class Profiler(TypedDict):
    available: bool
    why_not: str | None


class PmuNote(TypedDict):
    """Whether the host's PMU counts (collect/pmu.py)."""

    available: bool
    note: str
    events: list[str]


class ExplainRecord(TypedDict):
    schema_version: NotRequired[int]  # added where it is stored
    kind: NotRequired[Literal["explain"]]  # added where it is stored
    run_id: str
    created_at: str
    took_s: float
    valgrind: str
    method: ExplainMethod
    profiler: Profiler
    pmu: PmuNote
    results: list[ExplainEntry]


class WindowEvent(TypedDict):
    """The loadgen's `window` event (schema/events.schema.json): an edge of a counted
    window, with the Q calls (`ops`) and their rows inside it so far."""

    type: Literal["window"]
    edge: Literal["warm", "open", "close"]
    t_s: float
    ops: int
    rows: int


class ChangeRecord(TypedDict):
    """A metric of the run, column against base, as a cause cites it."""

    verdict: str
    ratio: float | None
    ci: list[float] | None


class MovedJson(TypedDict):
    """An explain figure on both builds, as a cause cites it."""

    base: float
    other: float
    ratio: float | None


class GrownFunction(TypedDict):
    """A function whose instructions per operation grew (0 where the base lacks it)."""

    function: str
    object: str
    base: float
    other: float
    delta: float


# What a cause cites, by name: a metric's change, an explain figure on both builds, the
# object file that grew most (and by how much), or the functions that grew.
CauseFigure = ChangeRecord | MovedJson | list[GrownFunction] | str | float | None


class CauseRecord(TypedDict):
    key: str
    text: str
    figures: dict[str, CauseFigure]
