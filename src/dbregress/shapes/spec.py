"""The step spec the loadgen reads (schema/step-spec.schema.json, checked against the
loadgen's own copy before a step starts). The engine and workload blocks are each a
union over drivers and benchmark families, flattened as the package docstring says:
`driver` and `kind` tell which keys a block carries."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class RocksDbOptions(TypedDict, total=False):
    block_align: bool
    block_size: int
    bloom_bits: float
    cache_mb: int
    cache_type: Literal["lru", "hyper_clock", "auto_hyper_clock"]
    compression: Literal["none", "lz4"]
    direct_io: bool
    estimated_entry_charge: int
    level0_file_num_compaction_trigger: int
    max_background_jobs: int
    max_bytes_for_level_base_mb: int
    sync: bool
    target_file_size_base_mb: int
    write_buffer_mb: int


class EngineSpec(TypedDict):
    """How the loadgen reaches the engine: postgres and mysql connect to a server, rocksdb
    opens the library in-process, null stands in for an engine (scheduler tests)."""

    driver: Literal["postgres", "mysql", "rocksdb", "null"]
    # postgres, mysql
    database: NotRequired[str]
    user: NotRequired[str]
    # postgres
    port: NotRequired[int]
    socket_dir: NotRequired[str]
    # mysql
    socket: NotRequired[str]
    storage_engine: NotRequired[Literal["InnoDB", "RocksDB"]]
    # rocksdb
    db_path: NotRequired[str]
    library: NotRequired[str]
    options: NotRequired[RocksDbOptions]
    version: NotRequired[str]
    # null
    fail_every: NotRequired[int]
    latency_us: NotRequired[int]


class Cleanup(TypedDict, total=False):
    statements_timeout_s: float


class WorkloadFields(TypedDict, total=False):
    """A workload's own fields, besides its `kind` and `step` (a step plan's section)."""

    duration_s: float
    rows: int
    # insert, micro
    cleanup: Cleanup
    # insert
    expected_rows: list[int]
    insert_rate: int
    lockstep: bool
    rows_per_commit: int
    # kv
    disable_wal: bool
    key_size: int
    keys: int
    overwrite_fraction: float
    range_len: int
    value_size: int
    writer_mb_per_s: float
    # micro
    range_size: int
    tables: int


class WorkloadSpec(WorkloadFields):
    """What the step does: `kind` names the family (insert, kv, micro), `step` the step."""

    kind: Literal["insert", "kv", "micro"]
    step: str


class Slices(TypedDict, total=False):
    """Interleaved turns: a slice ends after `ms` or after `q_calls` calls of Q."""

    ms: int
    q_calls: int


class WindowSpec(TypedDict):
    """A counting replay's window: `ops` calls of Q counted, after the warm-up."""

    ops: int
    probe_every: NotRequired[int]
    q_per_s: NotRequired[float]
    skip_ops: NotRequired[int]
    until_hit_rate: NotRequired[float]
    warm_ops: NotRequired[int]


class StepSpec(TypedDict):
    spec_version: NotRequired[Literal[3]]  # added where the loadgen is started (loadgen/client.py)
    seed: int
    clients: int
    engine: EngineSpec
    workload: WorkloadSpec
    handshake: NotRequired[bool]
    inject_slowdown: NotRequired[float]
    report_interval_ms: NotRequired[int]
    settle_first: NotRequired[bool]
    slices: NotRequired[Slices]
    wait_before_close: NotRequired[bool]
    warmup_s: NotRequired[float]
    window: NotRequired[WindowSpec]
