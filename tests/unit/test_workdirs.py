"""Data directories have short names whatever the run id, lab name and labels are: a
MySQL-family server's unix socket lives below them and its path must fit in 107 bytes.
A CI workdir of 45 bytes once pushed `<run id>/<label>-r1/socket/mysqld.sock` to 108."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from dbregress.cost.lane import Lane
from dbregress.engines.mysql import MAX_SOCKET_PATH
from dbregress.execution.execute import job_work_dir, run_work_dir
from dbregress.lab.file import parse_lab

LONG = "a-lab-name-chosen-by-a-user-who-likes-to-say-what-it-is-for"


def test_socket_paths_fit_whatever_the_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    work = Path("/var/tmp") / ("w" * 50)  # longer than any workdir the tests make
    monkeypatch.setenv("DBREGRESS_WORKDIR", str(work))
    label = "mariadb-11.4-with-a-long-label-too"
    text = (
        f'name = "{LONG}"\n'
        f'[[column]]\nlabel = "{label}"\nbuild = "mariadb@11.4.4"\nconfig = "default"\n'
        f'[[column]]\nlabel = "{label}-b"\nbuild = "mariadb@11.4.4"\nconfig = "default"\n'
    )
    lab = parse_lab(tomllib.loads(text), Path("x.toml"), text)
    run = tmp_path / f"20261125-003139-{LONG}"
    jobs = lab.jobs()
    dirs = {job_work_dir(run.name, job) for job in jobs}
    assert len(dirs) == len(jobs) > 2  # one per job
    lane = Lane(run, lab, notify=lambda _: None)
    dirs |= {lane.root / "99.50"}  # the lane's replay directories: <column>.<replay>
    for d in dirs:
        assert d.is_relative_to(work)
        assert len(str(d / "socket" / "mysqld.sock").encode()) <= MAX_SOCKET_PATH
    kinds = {run_work_dir(run.name, k) for k in ("run", "cost", "explain")}
    assert len(kinds) == 3
