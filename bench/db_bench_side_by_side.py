"""dbregress-loadgen against RocksDB's own db_bench, same settings, side by side.

Debian's db_bench (rocksdb-tools, RocksDB 7.8.3) and the loadgen on the same RocksDB
release (the rocksdbjni 7.8.3 jar's library, and Debian's librocksdb 7.8.3 that db_bench
itself links), each run pinned to the same single CPU: 1 thread, 1M keys, 20-byte keys
and 400-byte values (the published reports' db_bench defaults), no compression, WAL off for
fillseq; steps fillseq, readrandom, readwhilewriting with the 2 MB/s writer limit on that
step only, and overwrite, each followed on both sides by a flush + compaction settle so
every step starts from the same LSM shape. Prints ops/s side by side and the ratios.

    uv run python bench/db_bench_side_by_side.py [--seconds 20] [--keys 1000000] [--rounds 3]

Rounds are interleaved (the side that goes first rotates) and medians are printed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from dbregress import provision
from dbregress.benchmarks import kv
from dbregress.benchmarks.plan import StepPlan
from dbregress.engines.base import EngineOptions
from dbregress.execution.execute import make_engine
from dbregress.execution.step import collect_step
from dbregress.lab.file import KvSizes, Placement
from dbregress.provision import BuildSpec

STEPS = ("fillseq", "readrandom", "readwhilewriting", "overwrite")
SETTLE = "flush_mt_l0"  # between steps, on both sides: the same LSM shape to start from
# db_bench defaults that differ from RocksDB's own (found by diffing the OPTIONS files
# the two sides write): set them to RocksDB's, which is what the loadgen gets.
PARITY_FLAGS = [
    "--compression_ratio=0.5",
    "--statistics=1",
    "--enable_pipelined_write=0",
    "--table_cache_numshardbits=6",
    "--dump_malloc_stats=0",
    "--delayed_write_rate=16777216",
    "--hard_pending_compaction_bytes_limit=274877906944",
    "--pin_top_level_index_and_filter=1",
    "--index_shortening_mode=1",
]
OPS_LINE = re.compile(r"^(\w+)\s*:\s*[\d.]+ micros/op (\d+) ops/sec")


def db_bench(step: str, sizes: KvSizes, options: dict[str, Any], db: Path, cpu: int) -> float:
    args = [*kv.db_bench_args(step, sizes, options, db), *PARITY_FLAGS]
    out = subprocess.run(
        ["taskset", "-c", str(cpu), "db_bench", *args], check=True, capture_output=True, text=True
    ).stdout
    rates = [int(m.group(2)) for line in out.splitlines() if (m := OPS_LINE.match(line))]
    if step == SETTLE:
        return 0.0
    if not rates:
        raise SystemExit(f"db_bench printed no ops/sec for {step}:\n{out[-2000:]}")
    return float(rates[0])


def loadgen(engine: Any, step: str, sizes: KvSizes, cpu: int, scratch: Path) -> float:
    seconds = 0.0 if step in ("fillseq", SETTLE) else sizes.seconds
    plan = StepPlan(step, step, {}, duration_s=seconds, work=sizes.keys)
    spec = kv.step_spec(engine.connection(), plan, 1, seed=1)
    workload = dict(spec["workload"])
    workload.update(keys=sizes.keys, key_size=sizes.key_size, value_size=sizes.value_size)
    if seconds:
        workload["duration_s"] = seconds
    if step == "readwhilewriting":
        workload["writer_mb_per_s"] = sizes.writer_mb_per_s
    spec["workload"] = workload
    one = frozenset({cpu})
    out = collect_step(
        engine,
        spec,
        scratch / step,
        plan,
        seconds * 5 + 600,
        Placement("same", one, one),
        lambda e, r, q: None,
    )
    return float(out.result["q"]["value"])


def run_db_bench(sizes: KvSizes, options: dict[str, Any], db: Path, cpu: int) -> dict[str, float]:
    shutil.rmtree(db, ignore_errors=True)
    rates = {}
    for step in STEPS:
        rates[step] = db_bench(step, sizes, options, db, cpu)
        db_bench(SETTLE, sizes, options, db, cpu)
    shutil.rmtree(db, ignore_errors=True)
    return rates


def run_loadgen(build_spec: str, sizes: KvSizes, cpu: int, scratch: Path) -> dict[str, float]:
    build = provision.fetch(BuildSpec.parse(build_spec))
    workdir = scratch / f"lg-{build_spec.replace('@', '-')}"
    options = EngineOptions(
        workdir=workdir,
        log_path=workdir.with_suffix(".log"),
        config_name="byrx",
        settings=_settings(),
        sizes=kv_sizes(sizes),
    )
    engine = make_engine(build, options)
    engine.start()
    try:
        rates = {}
        for step in STEPS:
            rates[step] = loadgen(engine, step, sizes, cpu, scratch)
            loadgen(engine, SETTLE, sizes, cpu, scratch)
        return rates
    finally:
        engine.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _settings() -> dict[str, str]:
    return {
        "cache_mb": "1024",
        "compression": "none",
        "bloom_bits": "10",
        "block_size": "8192",
        "cache_type": "lru",
    }


def kv_sizes(sizes: KvSizes) -> Any:
    from dbregress.engines.base import Sizes

    return Sizes(cache_mb=0, wal_mb=0, data_mb=sizes.data_mb)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--cpu", type=int, default=1)
    p.add_argument("--key-size", type=int, default=20)
    p.add_argument("--value-size", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians shown")
    args = p.parse_args()
    sizes = KvSizes(
        keys=args.keys,
        key_size=args.key_size,
        value_size=args.value_size,
        threads=1,
        seconds=args.seconds,
        writer_mb_per_s=2.0,
    )
    scratch = Path(tempfile.mkdtemp(prefix="bench-kv-", dir="/var/tmp"))
    try:
        # The loadgen's options, as the byrx preset renders them with our overrides, are
        # what db_bench is given too.
        build = provision.fetch(BuildSpec.parse("rocksdb@7.8.3"))
        probe = make_engine(
            build,
            EngineOptions(
                workdir=scratch / "probe",
                log_path=scratch / "probe.log",
                config_name="byrx",
                settings=_settings(),
                sizes=kv_sizes(sizes),
            ),
        )
        probe.start()
        options = probe.connection()["options"]
        probe.stop()
        print(
            f"1 thread, {sizes.keys} keys, key {sizes.key_size} B, value "
            f"{sizes.value_size} B, {args.seconds:.0f} s per timed step, CPU {args.cpu}; "
            f"options {options}",
            flush=True,
        )
        runs: dict[str, list[dict[str, float]]] = {"db_bench": [], "jni": [], "system": []}
        sides = list(runs)
        for r in range(args.rounds):  # rotate who goes first: no side always runs cold
            for side in sides[r % 3 :] + sides[: r % 3]:
                if side == "db_bench":
                    runs[side].append(run_db_bench(sizes, options, scratch / "db", args.cpu))
                else:
                    spec = "rocksdb@7.8.3" if side == "jni" else "rocksdb@system"
                    runs[side].append(run_loadgen(spec, sizes, args.cpu, scratch))
                print(f"round {r + 1}: {side} done", flush=True)
        bench, jni, system = (
            {s: statistics.median(run[s] for run in runs[side]) for s in STEPS} for side in sides
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def spread(side: str, step: str) -> str:
        """The range of the round-by-round ratios against db_bench's run of that round."""
        rs = [r[step] / b[step] for r, b in zip(runs[side], runs["db_bench"], strict=True)]
        return f"{min(rs):.2f}-{max(rs):.2f}"

    print(
        "| step | db_bench 7.8.3 (Debian) | loadgen, rocksdbjni 7.8.3 | ratio (rounds' range) | "
        "loadgen, Debian librocksdb 7.8.3 | ratio (rounds' range) |"
    )
    print("|---|---|---|---|---|---|")
    for step in STEPS:
        print(
            f"| {step} | {bench[step]:,.0f} | {jni[step]:,.0f} | "
            f"{jni[step] / bench[step]:.2f} ({spread('jni', step)}) | {system[step]:,.0f} | "
            f"{system[step] / bench[step]:.2f} ({spread('system', step)}) |"
        )


if __name__ == "__main__":
    main()
