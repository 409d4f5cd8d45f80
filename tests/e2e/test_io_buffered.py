"""IO efficiency for buffered reads through the command line with a real RocksDB (the
iobuf config): fio's buffered runs keep the device's counters, and readrandom's row
gives its device reads per get, its SST reads per get and both page-cache hit rates,
with an efficiency only in fio's page-cache state and otherwise the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import dbregress, run_record
from tests.e2e.test_io_efficiency import io_lab

pytestmark = pytest.mark.engine


def test_an_iobuf_run_sets_its_page_cache_state_against_fios(tmp_path: Path, workdir: Path) -> None:
    out = dbregress("run", str(io_lab(tmp_path, "iobuf")), cwd=tmp_path, workdir=workdir)
    assert out.returncode == 0, out.stderr
    run, record = run_record(tmp_path)
    baseline = next(iter(record["device_baseline"].values()))
    assert baseline["absent"] is None and baseline["direct"] is False
    for when in ("before", "after"):
        assert "--ramp_time=0" in baseline[when]["command"]
        assert baseline[when]["device_reads"]["reads"] >= 0
    verdicts = json.loads((run / "verdicts.json").read_text())
    (section,) = verdicts["io_efficiency"]
    (row,) = section["rows"]
    assert row["step"] == "readrandom" and row["buffered"] is True
    # RocksDB counts its SST reads: about one a get at a tenth of the data in its cache
    assert row["file_reads_per_op"] > 0.5
    assert row["page_cache_hit_rate"] is not None and row["page_cache_hit_rate"] <= 1
    if row["io_efficiency"] is None:  # not fio's state (or fio beside another reader)
        assert row["no_efficiency"]
        said = f"- readrandom (r10): no IO efficiency: {row['no_efficiency']}"
        assert said in (run / "report.md").read_text()
    else:
        assert row["no_efficiency"] is None and row["io_efficiency"] > 0
    assert "| page-cache hits |" in (run / "report.md").read_text()
