"""The IO-efficiency section in every report format (report/io_tables.py): the table,
the chart, the JSON the verdicts schema describes, and the reasons it is absent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from dbregress.analysis import io_efficiency as io
from dbregress.report import io_tables
from tests.unit.test_io_efficiency import _baseline, _record, _result, _steps

SCHEMA = Path(__file__).parents[2] / "schema" / "verdicts.schema.json"


def _section(baseline: dict[str, Any] | None = None) -> io.IoSection:
    steps = _steps(_result("fillseq", "put", 0), _result("readrandom", "get", 8000))
    (section,) = io.sections(_record(baseline or _baseline()), steps)
    return section


def _io_schema() -> dict[str, Any]:
    schema = json.loads(SCHEMA.read_text())
    found: dict[str, Any] = schema["properties"]["io_efficiency"]
    return found


def test_markdown_has_the_baseline_the_table_and_the_absent_step() -> None:
    text = "\n".join(io_tables.markdown(_section()))
    assert "### IO efficiency" in text and "fio-3.33 on vda" in text
    assert "| readrandom | a |" in text and "| readrandom | b |" in text
    assert "fillseq: no IO efficiency: its operations are writes" in text
    assert "fio's command: `fio`" in text


def test_markdown_says_why_there_is_no_table() -> None:
    why = "fio not found on PATH (install Debian's `fio` package)"
    section = _section(_baseline(before=None, after=None, absent=why))
    text = "\n".join(io_tables.markdown(section))
    assert f"No IO-efficiency table: {why}." in text and "| readrandom" not in text
    assert io_tables.markdown(None) == []


def test_tsv_has_a_row_per_column_step_last() -> None:
    lines = io_tables.tsv(_section())
    rows = [ln for ln in lines if ln.endswith("\treadrandom")]
    assert len(rows) == 2 and rows[0].startswith("a\t")


def test_json_fits_the_verdicts_schema() -> None:
    for section in (_section(), _section(_baseline(before=None, after=None, absent="x"))):
        jsonschema.validate([io_tables.to_json(section)], _io_schema())


def test_html_has_one_chart_of_efficiency_and_latency() -> None:
    page = io_tables.html(_section(), {"a": "#111111", "b": "#1f77b4"})
    assert page is not None and len(page["rows"]) == 2
    chart = page["chart"]
    assert chart.count("<svg") == 2 and "IO efficiency" in chart and "predicted" in chart
    assert page["absent"] == [
        "fillseq: its operations are writes (put): no reads to set against fio's"
    ]
