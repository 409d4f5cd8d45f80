"""db_bench-style steps on an embedded key-value engine (docs/lab-file.md, The kv benchmark).

`plan` turns the lab's KvSizes into ordered steps, `step_spec` one of them into a loadgen
step spec (workload `kv`), and `db_bench_args` the same step into db_bench flags, so
the bench scripts can run RocksDB's own tool beside the loadgen with the same options.
"""

from __future__ import annotations

import math
from pathlib import Path

from dbregress.benchmarks.plan import PinnedPace, StepPlan
from dbregress.lab.file import KvSizes
from dbregress.shapes.spec import EngineSpec, RocksDbOptions, StepSpec, WorkloadFields

RANGE_STEPS = ("revrange", "fwdrange", "revrangewhilewriting", "fwdrangewhilewriting")
WHILE_WRITING = ("revrangewhilewriting", "fwdrangewhilewriting", "readwhilewriting")
SINGLE_CLIENT = ("fillseq", "flush_mt_l0")  # one writer; a maintenance action


# Closed-loop write steps whose counts depended on where the engine's background work
# stood when the window opened: RocksDB 10.2's overwritesome and overwriteandwait counted
# 1.8-2.4% apart between replays of one build (a memtable flush or compaction under way,
# or not), MyRocks' update-index 2.8% and update-nonindex 1.3-1.6%, InnoDB's
# update-nonindex 2.0%. Their counting replays settle the engine first (the loadgen's
# settle_first: flush memtables and wait for compaction, or write dirty pages), so every
# replay's window starts from the same quiet state. (What then remained in RocksDB's
# overwritesome, 2% between replays, was the memtable skiplist's random node heights,
# seeded from the client thread's address: the loadgen now starts its client threads
# before it loads the engine, so that address is the same in every replay and build.)
SETTLE_STEPS = ("overwritesome", "overwrite", "overwriteandwait")


# The Q calls per second a *whilewriting step's counted window paces its writer at, in
# every build and on every host: a put every 200,000 / (puts per second) reads, as a
# whole number (40 at the default 2 MB/s of 420-byte entries). At the base's rate in the
# time lane instead, the puts per read moved with the host's speed. High enough that
# the calls before the window warm the block cache as the time lane's did on a 2-vCPU
# host (113,000-251,000 calls by its middle at the quickstart's sizes); the window
# opens earlier once the cache is as warm (analysis/state.py until_rate).
COUNTED_Q_PER_S = 200_000.0


def counted_pace(sizes: KvSizes, plan: StepPlan) -> PinnedPace | None:
    """The writer of a *whilewriting step's counted window (PinnedPace): the puts per
    second the loadgen paces it at (writer_mb_per_s in bytes, whole, over the entry's
    key and value bytes); None for a step without a paced writer."""
    if plan.step not in WHILE_WRITING or sizes.writer_mb_per_s <= 0:
        return None
    puts = round(sizes.writer_mb_per_s * 2**20) / (sizes.key_size + sizes.value_size)
    return PinnedPace.near(puts, COUNTED_Q_PER_S)


def _section(sizes: KvSizes, step: str, seconds: float | None = None) -> WorkloadFields:
    """The kv workload's fields of the step spec: the data's shape plus what this step
    needs."""
    section: WorkloadFields = {
        "keys": sizes.keys,
        "key_size": sizes.key_size,
        "value_size": sizes.value_size,
    }
    if seconds is not None:
        section["duration_s"] = seconds
    if step in RANGE_STEPS:
        section["range_len"] = sizes.range_len
    if step in WHILE_WRITING:
        section["writer_mb_per_s"] = sizes.writer_mb_per_s
    if step == "overwritesome":
        section["overwrite_fraction"] = sizes.overwrite_fraction
    # fillseq writes without a WAL by the spec's own default (disable_wal), as db_bench's
    # fillseq is run by the published reports
    return section


def _timed(sizes: KvSizes, step: str, seconds: float, reported: bool = True) -> StepPlan:
    return StepPlan(
        step,
        step,
        _section(sizes, step, seconds),
        reported=reported,
        duration_s=seconds,
    )


def plan(sizes: KvSizes) -> list[StepPlan]:
    """The steps of `sizes.steps`, in the published reports' order (the lab keeps them
    in that order)."""
    steps: dict[str, StepPlan] = {
        "fillseq": StepPlan("fillseq", "fillseq", _section(sizes, "fillseq"), work=sizes.keys),
        "revrange": _timed(sizes, "revrange", sizes.short_seconds),
        "overwritesome": StepPlan(
            "overwritesome",
            "overwritesome",
            _section(sizes, "overwritesome"),
            work=math.ceil(sizes.overwrite_fraction * sizes.keys),
        ),
        # flush the memtable, compact L0 into L1, wait: a level start, not a measurement
        "flush_mt_l0": StepPlan(
            "flush_mt_l0",
            "flush_mt_l0",
            _section(sizes, "flush_mt_l0"),
            reported=False,
            work=sizes.keys,
        ),
    }
    for step in ("readrandom", "fwdrange", *WHILE_WRITING, "overwriteandwait"):
        steps[step] = _timed(sizes, step, sizes.seconds)
    return [steps[name] for name in sizes.steps]


def step_spec(connection: EngineSpec, plan: StepPlan, threads: int, seed: int) -> StepSpec:
    """The loadgen step spec (schema/step-spec.schema.json) of one kv step."""
    return {
        "engine": connection,
        "workload": plan.workload("kv"),
        "clients": 1 if plan.step in SINGLE_CLIENT else threads,
        "seed": seed,
    }


# -- db_bench, the peer the loadgen is compared with ----------------------------------

# our step -> db_bench benchmarks (as RocksDB's tools/benchmark.sh runs them)
DB_BENCH_BENCHMARKS = {
    "fillseq": "fillseq",
    "revrange": "seekrandom",
    "overwritesome": "overwrite",
    "flush_mt_l0": "flush,waitforcompaction,compact0,waitforcompaction",
    "readrandom": "readrandom",
    "fwdrange": "seekrandom",
    "revrangewhilewriting": "seekrandomwhilewriting",
    "fwdrangewhilewriting": "seekrandomwhilewriting",
    "readwhilewriting": "readwhilewriting",
    "overwriteandwait": "overwrite,waitforcompaction",
    "overwrite": "overwrite",
}
DB_BENCH_CACHE_TYPES = {
    "lru": "lru_cache",
    "hyper_clock": "hyper_clock_cache",
    "auto_hyper_clock": "auto_hyper_clock_cache",
}


def _flag(name: str, value: object) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, float):
        value = f"{value:g}"
    return f"--{name}={value}"


def _option_flags(options: RocksDbOptions) -> list[str]:
    """Our engine options (the spec's `options`, typed) as db_bench flags."""
    mb = 2**20
    direct = bool(options.get("direct_io", False))
    flags = {
        "cache_size": int(options.get("cache_mb", 8)) * mb,
        "cache_type": DB_BENCH_CACHE_TYPES[options.get("cache_type", "lru")],
        "block_size": options.get("block_size", 8192),
        "bloom_bits": options.get("bloom_bits", 10),
        "compression_type": options.get("compression", "none"),
        "use_direct_reads": direct,
        "use_direct_io_for_flush_and_compaction": direct,
        "write_buffer_size": int(options.get("write_buffer_mb", 64)) * mb,
        "max_background_jobs": options.get("max_background_jobs", 2),
        "level0_file_num_compaction_trigger": options.get("level0_file_num_compaction_trigger", 4),
        "max_bytes_for_level_base": int(options.get("max_bytes_for_level_base_mb", 256)) * mb,
        "target_file_size_base": int(options.get("target_file_size_base_mb", 64)) * mb,
        "sync": bool(options.get("sync", False)),
    }
    if options.get("block_align"):  # only when asked: the C API has it from 11.0 only
        flags["block_align"] = True
    return [_flag(name, value) for name, value in flags.items()]


def db_bench_args(
    step: str, sizes: KvSizes, options: RocksDbOptions, db: Path | str, seed: int = 1
) -> list[str]:
    """db_bench's flags (without the program name) for our kv `step` with these sizes
    and engine options, on database directory `db`; checked with Debian's db_bench 7.8.3.
    """
    if step not in DB_BENCH_BENCHMARKS:
        raise ValueError(f"no db_bench equivalent of kv step {step!r}")
    args = [
        _flag("benchmarks", DB_BENCH_BENCHMARKS[step]),
        _flag("db", db),
        _flag("num", sizes.keys),
        _flag("key_size", sizes.key_size),
        _flag("value_size", sizes.value_size),
        _flag("threads", 1 if step in SINGLE_CLIENT else sizes.threads),
        _flag("use_existing_db", step != "fillseq"),
        _flag("disable_wal", step == "fillseq"),
        _flag("seed", seed),
        _flag("histogram", True),
        *_option_flags(options),
    ]
    seconds = sizes.short_seconds if step == "revrange" else sizes.seconds
    if step not in ("fillseq", "overwritesome", "flush_mt_l0"):
        args.append(_flag("duration", max(1, math.ceil(seconds))))
    if step == "overwritesome":
        args.append(_flag("writes", math.ceil(sizes.overwrite_fraction * sizes.keys)))
    if step in RANGE_STEPS:
        args.append(_flag("seek_nexts", sizes.range_len))
        args.append(_flag("reverse_iterator", step.startswith("rev")))
    if step in WHILE_WRITING:
        args.append(_flag("benchmark_write_rate_limit", int(sizes.writer_mb_per_s * 2**20)))
    return args
