"""An engine run under valgrind gets longer timeouts, but a stop that hangs is killed
within minutes: a server whose child valgrind crashed in never shuts down, and waiting
20 minutes for it held the whole cost lane (a clean-clone run saw it)."""

from __future__ import annotations

from pathlib import Path

from dbregress.execution import prepare
from dbregress.lab.file import load_lab
from tests.unit.test_gate import LAB  # a PostgreSQL insert lab of two columns


def test_a_stop_under_valgrind_waits_three_minutes_at_most(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text(LAB)
    lab = load_lab(tmp_path / "lab.toml")
    comp = lab.comparisons[0]

    def options(slow: float) -> prepare.EngineOptions:
        return prepare.engine_options(
            lab, comp, comp.base, tmp_path / "w", tmp_path / "log", slow=slow
        )

    plain, counted = options(1), options(20)
    assert plain.stop_timeout_s == 60.0
    assert counted.stop_timeout_s == 60.0 * prepare.STOP_SLOW_MAX == 180.0
    assert counted.start_timeout_s == 20 * plain.start_timeout_s  # starting stays patient
