"""IO efficiency for buffered reads (analysis/io_efficiency.py, analysis/fio_baseline.py):
fio's page-cache hits are counted from the device's counters over its run, the engine's
from its own count of its file reads, and an efficiency is given only where the two are
the same state; a device time at or below zero is flagged, never used."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dbregress.analysis import fio_baseline as fb
from dbregress.analysis import io_efficiency as io
from dbregress.collect import diskstats, fio
from dbregress.report import io_tables
from tests.unit.test_io_efficiency import _baseline, _record, _result, _steps

SCHEMA = Path(__file__).parents[2] / "schema" / "verdicts.schema.json"


def _figures(ios: float, latency_us: float, cpu_us: float) -> dict[str, float]:
    """fio's JSON figures of a 10-second, one-job run: `cpu_us` of system CPU a read."""
    runtime_ms = 10_000.0
    return {
        "iops": ios / 10,
        "ios": ios,
        "clat_mean_us": latency_us,
        "lat_mean_us": latency_us,
        "usr_cpu_pct": 0.0,
        "sys_cpu_pct": cpu_us * ios / (runtime_ms * 10),
        "job_runtime_ms": runtime_ms,
    }


def _fio_run(ios: float, device_reads: int | None, latency_us: float, cpu_us: float) -> dict:
    run: dict[str, Any] = {"figures": _figures(ios, latency_us, cpu_us), "command": ["fio"]}
    if device_reads is not None:
        run["device_reads"] = {"reads": device_reads, "read_bytes": device_reads * 8192}
    return run


def _buffered(device_reads: int | None = 100_000, latency_us: float = 60.0) -> dict[str, Any]:
    """fio at 100,000 reads in 10 s with 20 µs of CPU a read."""
    run = _fio_run(100_000, device_reads, latency_us, 20.0)
    return _baseline(direct=False, before=run, after=run)


def _engine(device_reads: int, file_reads: int | None, count: int = 8000) -> dict[str, Any]:
    """A RocksDB readrandom repeat: `file_reads` SST reads, `device_reads` of them missed
    the page cache (None: a RocksDB that counts no SST reads, only block-cache misses)."""
    result = _result("readrandom", "get", device_reads, count=count)
    stats = {"rocksdb.block.cache.miss": float(count)}
    if file_reads is not None:
        stats["rocksdb.sst.read.micros.count"] = float(file_reads)
    result["engine_stats"] = {"statistics": stats}
    return result


def test_a_buffered_fio_run_counts_its_page_cache_hits_and_the_device_time_per_device_read() -> (
    None
):
    # half of fio's reads reached the device: 60 µs a read = 20 of CPU + half of 80 µs
    f = fb.FioFigures.of(_figures(100_000, 60.0, 20.0), False, {"reads": 50_000})
    assert f.device_share == pytest.approx(0.5)
    assert f.page_cache_hit_rate == pytest.approx(0.5)
    assert f.iops == pytest.approx(10_000)
    assert f.device_iops == pytest.approx(5_000)
    assert f.cpu_us == pytest.approx(20.0)
    assert f.device_us == pytest.approx(80.0)
    assert f.device_flag is None


def test_an_o_direct_run_reads_the_device_on_every_read_as_before() -> None:
    f = fb.FioFigures.of(_figures(100_000, 60.0, 20.0))
    assert f.device_share == 1.0 and f.page_cache_hit_rate is None
    assert f.device_iops == f.iops and f.device_us == pytest.approx(40.0)


def test_the_same_state_gives_an_efficiency_of_device_reads_per_second() -> None:
    # fio: every read a device read (0% hits); the engine: 7,600 of 8,000 SST reads did
    steps = _steps(_engine(7600, 8000))
    (section,) = io.sections(_record(_buffered()), steps)
    row = section.row("a", "readrandom")
    assert row is not None and row.buffered
    assert row.page_cache_hit_rate == pytest.approx(0.05)
    assert row.fio_page_cache_hit_rate == pytest.approx(0.0)
    assert row.file_reads_per_op == pytest.approx(1.0)
    assert row.no_efficiency is None
    assert row.fio_iops == pytest.approx(10_000)
    assert row.efficiency == pytest.approx(7600 / 10_000)
    assert row.device_us == pytest.approx(40.0)
    assert row.predicted_us == pytest.approx(11 + 8 + 0.95 * 40.0)


def test_a_warmer_page_cache_than_fios_gives_no_efficiency_and_says_why() -> None:
    # the engine's page cache served 99% of its reads, fio's none: its device reads per
    # second say nothing of its efficiency
    steps = _steps(_engine(80, 8000))
    (section,) = io.sections(_record(_buffered()), steps)
    row = section.row("a", "readrandom")
    assert row is not None and row.efficiency is None and row.predicted_efficiency is None
    assert row.no_efficiency is not None
    assert "99.0%" in row.no_efficiency and "fio's 0.0%" in row.no_efficiency
    assert "less often" in row.no_efficiency
    assert row.reads_per_op == pytest.approx(0.01)  # still reported
    text = "\n".join(io_tables.markdown(section))
    assert "| page-cache hits |" in text and "99.0%" in text
    assert f"- readrandom (a): no IO efficiency: {row.no_efficiency}" in text


def test_the_state_band_follows_the_model() -> None:
    # with fio's 20 µs of CPU and 40 µs of device, 10 points of hit rate move a reader's
    # device reads per second by 3.6%: inside the band; 15 points by 5.6%: outside
    cpu, device = 20.0, 40.0
    assert fb.state_moves(0.1, 0.0, cpu, device) == pytest.approx(0.9 * 60 / 56 - 1)
    assert abs(fb.state_moves(0.1, 0.0, cpu, device)) < io.STATE_BAND
    assert abs(fb.state_moves(0.15, 0.0, cpu, device)) > io.STATE_BAND
    assert fb.state_moves(0.3, 0.3, cpu, device) == 0.0


def test_an_engine_that_does_not_count_its_file_reads_gets_no_efficiency() -> None:
    steps = _steps(_engine(7600, None))
    (section,) = io.sections(_record(_buffered()), steps)
    row = section.row("a", "readrandom")
    assert row is not None and row.efficiency is None and row.page_cache_hit_rate is None
    assert row.no_efficiency is not None and "no count of its file reads" in row.no_efficiency


def test_a_postgres_step_without_its_backends_reads_is_not_set_against_fio() -> None:
    steps = _steps(_result("qp100", "point_query", 7600))
    (section,) = io.sections(_record(_buffered()), steps)
    row = section.row("a", "qp100")
    assert row is not None and row.efficiency is None and row.reads_per_op > 0


@pytest.mark.parametrize(
    ("key", "other"),
    [
        ("postgres.backend.read_calls", "postgres.backend.read_bytes"),
        ("innodb.buffer_pool_reads", "innodb.buffer_pool_read_requests"),
    ],
)
def test_a_sql_engines_file_reads_give_its_page_cache_hit_rate(key: str, other: str) -> None:
    result = _result("qp100", "point_query", 7600)
    result["engine_stats"] = {"statistics": {key: 8000.0, other: 1.0}}
    (section,) = io.sections(_record(_buffered()), _steps(result))
    row = section.row("a", "qp100")
    assert row is not None and row.page_cache_hit_rate == pytest.approx(0.05)
    assert row.efficiency == pytest.approx(0.76)


def test_a_buffered_baseline_stored_before_device_reads_were_counted_says_so() -> None:
    steps = _steps(_engine(7600, 8000))
    (section,) = io.sections(_record(_buffered(device_reads=None)), steps)
    assert section.rows == []
    assert "not counted" in section.absent[0].why


def test_a_device_time_at_or_below_zero_is_flagged_and_the_model_left_out() -> None:
    # O_DIRECT: fio's 30 µs mean latency below its own 40 µs of CPU a read
    run = _fio_run(100_000, None, 30.0, 40.0)
    steps = _steps(_result("readrandom", "get", 8000))
    (section,) = io.sections(_record(_baseline(before=run, after=run)), steps)
    row = section.row("a", "readrandom")
    assert row is not None
    assert row.efficiency == pytest.approx(8000 / 10_000)  # read IOPS still compare
    assert row.device_us is None and row.predicted_us is None and row.diff_us is None
    assert row.device_flag is not None and "-10.0 µs" in row.device_flag
    text = "\n".join(io_tables.markdown(section))
    assert "device time FLAGGED" in text
    assert f"- the model's figures are left out: {row.device_flag}" in text
    tsv = "\n".join(io_tables.tsv(section))
    assert f"the model's figures are left out: {row.device_flag}" in tsv
    page = io_tables.html(section, {})
    assert page is not None and page["chart"] == ""  # the model's dots are left out too


def test_a_buffered_fio_run_whose_reads_all_hit_the_cache_is_flagged() -> None:
    f = fb.FioFigures.of(_figures(100_000, 60.0, 20.0), False, {"reads": 0})
    assert f.device_us is None and f.device_flag is not None and "page cache" in f.device_flag


def test_buffered_and_flagged_rows_fit_the_verdicts_schema() -> None:
    schema = json.loads(SCHEMA.read_text())["properties"]["io_efficiency"]
    flagged = _fio_run(100_000, None, 30.0, 40.0)
    items = []
    for baseline, steps in (
        (_buffered(), _steps(_engine(80, 8000))),
        (_buffered(), _steps(_engine(7600, 8000))),
        (_baseline(before=flagged, after=flagged), _steps(_result("readrandom", "get", 8000))),
    ):
        (section,) = io.sections(_record(baseline), steps)
        items.append(io_tables.to_json(section))
    jsonschema.validate(items, schema)
    assert items[0]["rows"][0]["io_efficiency"] is None
    assert items[0]["rows"][0]["no_efficiency"]
    assert items[1]["rows"][0]["io_efficiency"] == pytest.approx(0.76)
    assert items[2]["baseline"]["device_flag"] and items[2]["rows"][0]["device_us"] is None


def test_a_buffered_fio_job_has_no_ramp_an_o_direct_one_keeps_it(tmp_path: Path) -> None:
    buffered = fio.FioJob(tmp_path, 8192, False, 1, 10, 256).command()
    direct = fio.FioJob(tmp_path, 8192, True, 1, 10, 256).command()
    assert "--ramp_time=0" in buffered and f"--ramp_time={fio.RAMP_S}" in direct


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_a_buffered_fio_run_reads_the_devices_counters(tmp_path: Path) -> None:
    device = diskstats.find_device(tmp_path).name
    if device is None:
        pytest.skip("this host's temporary directory has no block device")
    job = fio.FioJob(tmp_path, 4096, False, 2, 1, 8)
    _command, output, reads = fio.run_counted(job, device)
    assert reads is not None and reads["reads"] >= 0 and reads["read_bytes"] >= 0
    figures = fio.read_figures(output)
    f = fb.FioFigures.of(figures, False, reads)
    assert f.page_cache_hit_rate is not None and f.page_cache_hit_rate <= 1
    _command, _output, none = fio.run_counted(fio.FioJob(tmp_path, 4096, True, 1, 1, 8), device)
    assert none is None


def test_a_buffered_run_cannot_go_uncounted() -> None:
    job = fio.FioJob(Path("/nonexistent"), 4096, False, 1, 1, 8)
    with pytest.raises(fio.FioError, match="cannot read no-such-device's counters"):
        fio.run_counted(job, "no-such-device")


def test_device_reads_of_an_engine_that_read_none_of_its_files_are_not_its_own() -> None:
    # PostgreSQL's backends served every read from shared buffers (0 read calls), while
    # the device served reads: another process's
    result = _result("qp100", "point_query", 400)
    result["engine_stats"] = {"statistics": {"postgres.backend.read_calls": 0.0}}
    (section,) = io.sections(_record(_buffered()), _steps(result))
    row = section.row("a", "qp100")
    assert row is not None and row.efficiency is None and row.page_cache_hit_rate is None
    assert row.file_reads_per_op == 0.0
    assert row.no_efficiency is not None and "another process's reads" in row.no_efficiency


def test_a_buffered_fio_run_beside_another_reader_is_flagged() -> None:
    # the device served 31% more requests than fio read: someone else read it too
    f = fb.FioFigures.of(_figures(100_000, 60.0, 20.0), False, {"reads": 131_000})
    assert f.page_cache_hit_rate == pytest.approx(-0.31)
    assert f.device_flag is not None and "31% more read requests" in f.device_flag
    run = _fio_run(100_000, 131_000, 60.0, 20.0)
    steps = _steps(_engine(7600, 8000))
    (section,) = io.sections(_record(_baseline(direct=False, before=run, after=run)), steps)
    row = section.row("a", "readrandom")
    assert row is not None and row.efficiency is None and row.predicted_us is None
    assert row.no_efficiency is not None and "another process read it" in row.no_efficiency
    # a few requests of others' are within the margin
    assert (
        fb.FioFigures.of(_figures(100_000, 60.0, 20.0), False, {"reads": 102_000}).device_flag
        is None
    )


def test_device_reads_mostly_of_another_process_give_no_efficiency() -> None:
    # O_DIRECT: the engine's own processes read 30% of the device's bytes in the window
    result = _result("readrandom", "get", 8000)
    result["server"]["read_bytes"] = int(0.3 * 8000 * 8192)
    (section,) = io.sections(_record(_baseline()), _steps(result))
    row = section.row("a", "readrandom")
    assert row is not None and row.efficiency is None and row.own_share == pytest.approx(0.3)
    assert (
        row.no_efficiency is not None and "read 30% of the device's read bytes" in row.no_efficiency
    )
    # a process tree whose reads could not all be read says nothing of the share
    result["server"]["io_complete"] = False
    (section,) = io.sections(_record(_baseline()), _steps(result))
    row = section.row("a", "readrandom")
    assert row is not None and row.own_share is None and row.efficiency is not None


def test_a_run_that_could_not_drop_the_page_cache_says_so_under_its_buffered_rows() -> None:
    # the same figures as the same-state case, but the run could not drop the page cache
    # (not root): a row is still judged by its measured state (99% hits: no efficiency)
    for device_reads, judged in ((7600, True), (80, False)):
        record = _record(_buffered())
        record["page_cache"] = {"dropped": 0, "failed": "cannot drop the page cache; run as root"}
        (section,) = io.sections(record, _steps(_engine(device_reads, 8000)))
        row = section.row("a", "readrandom")
        assert row is not None and (row.efficiency is not None) == judged
        text = "\n".join(io_tables.markdown(section))
        assert "the page cache was not dropped before each job and step" in text
        assert "run as root" in text
    # O_DIRECT columns read the device whatever the page cache holds: no such note
    record = _record(_baseline(direct=True))
    record["page_cache"] = {"dropped": 0, "failed": "cannot drop the page cache; run as root"}
    (section,) = io.sections(record, _steps(_result("readrandom", "get", 8000, count=8000)))
    row = section.row("a", "readrandom")
    assert row is not None and row.no_efficiency is None and row.efficiency is not None
    assert "not dropped" not in "\n".join(io_tables.markdown(section))
