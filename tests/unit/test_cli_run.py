"""`dbregress run`'s error handling, without engines: a report that cannot be built
must not hide the run's own error, and bad arguments are named."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from dbregress.cli import run as cli_run
from dbregress.model.errors import DbregressError, EngineError, LabError, StoreError

LAB = 'name = "t"\nplacement = "same"\n[[column]]\nlabel = "a"\nbuild = "postgres@17.2.0"\n'


class _Runner:
    def __init__(self, lab: Any, results: Path, *args: Any, **kwargs: Any) -> None:
        self.path = results / "run"

    def run(self) -> Path:
        raise EngineError("the engine crashed in step l.i0")


def _args(tmp_path: Path, **kw: Any) -> argparse.Namespace:
    lab = tmp_path / "lab.toml"
    lab.write_text(LAB)
    base = {
        "lab": lab,
        "resume": None,
        "results": tmp_path / "results",
        "fail_on": None,
        "scheduler": None,
        "tls": None,
        "recount": False,
    }
    return argparse.Namespace(**(base | kw))


def test_a_failing_report_does_not_hide_the_run_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unreadable_report(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("run.json: not a run record")

    monkeypatch.setattr(cli_run, "runner_for", lambda lab, results, *a, **kw: _Runner(lab, results))
    monkeypatch.setattr(cli_run, "write_report", unreadable_report)
    with pytest.raises(EngineError, match=r"crashed in step l\.i0"):
        cli_run.run(_args(tmp_path))
    assert "no report (StoreError" in capsys.readouterr().err


def test_a_bug_in_the_report_is_not_hidden_by_the_run_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug exits 3 (cli/main.py), the run's error said on stderr; it was 2 (the run's)."""

    def broken_report(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("q")

    monkeypatch.setattr(cli_run, "runner_for", lambda lab, results, *a, **kw: _Runner(lab, results))
    monkeypatch.setattr(cli_run, "write_report", broken_report)
    with pytest.raises(KeyError):
        cli_run.run(_args(tmp_path))
    err = capsys.readouterr().err
    assert "no report (KeyError" in err and "Error: the engine crashed in step l.i0" in err


def test_lab_or_resume_not_both(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="--resume"):
        cli_run.run(_args(tmp_path, resume="latest"))
    with pytest.raises(LabError, match="--resume"):
        cli_run.run(_args(tmp_path, lab=None))


def test_resume_of_an_unknown_run(tmp_path: Path) -> None:
    with pytest.raises(DbregressError, match="not a run folder"):
        cli_run.run(_args(tmp_path, lab=None, resume="nope"))
