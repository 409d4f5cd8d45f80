"""The engine settings of a counting replay by the build's version: PostgreSQL 18's
default `io_method = worker` reads in I/O worker processes, so the sessions' backends,
whose reads are the state a counted window is checked against, would see no miss;
counting replays of 18 and later pin `io_method = sync`, and disclose it, while 17 and
earlier (which refuse the setting) get none."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dbregress.engines.postgres import PostgresEngine, major_version
from dbregress.explain.jobs import count_settings
from dbregress.explain.replay_changes import setting_changes
from dbregress.lab.file import Lab, load_lab
from dbregress.provision import Build

LAB = """\
name = "io"
count = false
benchmark = "insert"
[[column]]
label = "pg17"
build = "postgres@17.2.0"
[[column]]
label = "pg18"
build = "postgres@18.1.0"
[[column]]
label = "mine"
build = "postgres@system"
[insert]
load_rows = 1000
write_rows = 100
query_seconds = 1
"""


@pytest.mark.parametrize(
    ("said", "major"),
    [
        ("postgres (PostgreSQL) 18.1", 18),
        ("postgres (PostgreSQL) 19devel", 19),
        ("postgres (PostgreSQL) 17.2", 17),
        ("postgres (PostgreSQL) 9.6.24", 9),
        ("18.1.0", 18),
        ("12.20.0", 12),
        ("system", None),
        ("/opt/pg18/bin", None),
    ],
)
def test_the_major_version_is_read_from_what_a_build_says(said: str, major: int | None) -> None:
    assert major_version(said) == major


def test_a_counting_replay_of_postgres_18_reads_in_its_backends() -> None:
    assert PostgresEngine.counting_settings("postgres (PostgreSQL) 18.1")["io_method"] == "sync"
    assert PostgresEngine.counting_settings("18.0.0")["io_method"] == "sync"
    for older in ("postgres (PostgreSQL) 17.2", "12.20.0", "system"):
        quiet = PostgresEngine.counting_settings(older)
        assert "io_method" not in quiet, older  # 17 and earlier refuse it
        assert quiet["autovacuum"] == "off"


def _job_settings(tmp_path: Path, label: str, said: str) -> dict[str, str]:
    """The settings a counting replay of `label` starts its engine with (jobs.py)."""

    class Job:  # what count_settings reads of a ColumnJob
        def __init__(self) -> None:
            self.build = Build(column.build, tmp_path, said)
            self.column = column

    (column,) = [c for c in _lab(tmp_path).columns if c.label == label]
    return count_settings(Job())  # type: ignore[arg-type]


def _lab(tmp_path: Path) -> Lab:
    path = tmp_path / "lab.toml"
    path.write_text(LAB)
    return load_lab(path)


def test_the_rendered_counting_settings_hold_io_method_sync_for_18_only(tmp_path: Path) -> None:
    assert _job_settings(tmp_path, "pg18", "postgres (PostgreSQL) 18.1")["io_method"] == "sync"
    assert "io_method" not in _job_settings(tmp_path, "pg17", "postgres (PostgreSQL) 17.2")
    # a build named by path or `system`: by what its binary says of itself
    assert _job_settings(tmp_path, "mine", "postgres (PostgreSQL) 18.0")["io_method"] == "sync"
    assert "io_method" not in _job_settings(tmp_path, "mine", "postgres (PostgreSQL) 16.4")


def test_io_method_sync_is_disclosed_with_the_other_counting_settings(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    cols = {c.label: c for c in lab.columns}
    # from the lab's version where the build is not at hand (a fleet's lane)
    assert setting_changes(cols["pg18"])["io_method"] == "sync"
    assert "io_method" not in setting_changes(cols["pg17"])
    # from what the build says of itself where it is
    mine = Build(cols["mine"].build, tmp_path, "postgres (PostgreSQL) 18.1")
    assert setting_changes(cols["mine"], build=mine)["io_method"] == "sync"
    assert "io_method" not in setting_changes(cols["mine"])  # `system`: not known here
    # a column's own io_method wins, as its other settings do
    own = dataclasses.replace(cols["pg18"], settings={"io_method": "sync"})
    assert "io_method" not in setting_changes(own)
