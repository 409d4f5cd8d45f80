"""docs/metrics.md defines every metric the code reports, with the same unit and direction."""

from __future__ import annotations

from pathlib import Path

from dbregress.analysis.metrics import ALL

DOC = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()


def test_every_metric_is_documented_with_its_unit_and_direction() -> None:
    for metric in ALL:
        line = next((ln for ln in DOC.splitlines() if f"`{metric.key}`" in ln), None)
        assert line is not None, f"docs/metrics.md does not define {metric.key}"
        cells = [c.strip() for c in line.split("|")]
        assert metric.unit in cells and metric.better in cells, line
