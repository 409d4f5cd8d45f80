"""Fixes of issue 41's review in the history and the measured floors: an A/A calibration
run that cannot be read is said and left out (the others still give the floor); a
history that cannot be read is one StoreError naming the file, said by the report; a
cost series is cut where the count's scope changes; a rebuilt local build is another
build (its server binary's digest); and why valgrind's CPU could not be read stays out
of the method identity. Run folders, histories and builds are real files in tmp_path."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dbregress import provision
from dbregress.method import identity as method
from dbregress.model.errors import StoreError
from dbregress.provision import BuildSpec
from dbregress.report.history_moves import against_history, floor_cells, history_floor
from dbregress.store.calibration import calibration_floor
from dbregress.store.files import write_json
from dbregress.store.history import History, history_path, reindex
from dbregress.store.replays import load_replays, save_replay
from dbregress.store.run import read_record
from tests.unit.test_noise_floor import a_run, counted, two_states


def _aa_run(root: Path, tmp: Path) -> None:
    """An A/A calibration run, cal-aa, whose base is counted in two states."""
    rng = random.Random(3)
    cal = a_run(root, tmp, "cal-aa", 1, {"base": two_states(rng), "base-aa": []})
    record = read_record(cal)
    record["comparisons"][0]["labels"] = ["base", "base-aa"]
    write_json(cal / "run.json", record)
    for n, v in enumerate(two_states(rng), start=1):
        save_replay(cal, "base-aa", n, counted("base-aa", n, v))  # type: ignore[arg-type]


def _calibration(root: Path, placements: dict[str, str]) -> None:
    """The host's calibration of lab nightly, naming its placements' runs."""
    write_json(
        root / "calibration" / "box1.json",
        {
            "schema_version": 1,
            "kind": "calibration",
            "lab": "nightly",
            "change": 0.05,
            "placements": {
                name: {"run_id": run_id, "median_cv": 0.01, "steps": []}
                for name, run_id in placements.items()
            },
        },
    )


def test_a_deleted_calibration_run_is_said_and_the_others_still_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "results"
    _aa_run(root, tmp_path)
    _calibration(root, {"same": "cal-aa", "other": "cal-gone"})
    run = a_run(root, tmp_path, "tonight", 2, {"base": [1e4] * 3, "head": [1.015e4] * 3})
    record, replays = read_record(run), load_replays(run)
    told: list[str] = []
    floor = calibration_floor(root, record, replays, notify=told.append)
    assert floor.noise["estimated_cycles"]["insert/l.i0"] > 0.005  # cal-aa still serves
    assert floor.runs["insert/l.i0"] == ("cal-aa",)
    assert floor.note.startswith("not read: ") and "cal-gone" in floor.note
    assert len(told) == 1 and "left out of the calibration floor" in told[0]
    assert "cal-gone" in told[0]
    # By default it is said on stderr, as docs/verdicts.md says.
    calibration_floor(root, record, replays)
    err = capsys.readouterr().err
    assert err.startswith("warning: an A/A calibration run was left out") and "cal-gone" in err
    # Every calibration run gone: no floor, and the note says why.
    _calibration(root, {"same": "cal-gone"})
    gone = calibration_floor(root, record, replays, notify=told.append)
    assert gone.noise == {} and gone.note.startswith("not read: ") and "cal-gone" in gone.note


def _damage(root: Path, table: str) -> None:
    """Overwrite the first page of `table` in the history file: a damaged page."""
    with sqlite3.connect(history_path(root), isolation_level=None) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,))
        (size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    with open(history_path(root), "r+b") as f:
        f.seek((page[0] - 1) * size)
        f.write(b"\xff" * size)


def test_a_damaged_history_page_is_a_store_error_the_report_says(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for night in (1, 2, 3):
        a_run(root, tmp_path, f"night-{night}", night, {"base": [1e4] * 3, "head": [1e4] * 3})
    run = a_run(root, tmp_path, "tonight", 4, {"base": [1e4] * 3, "head": [1e4] * 3})
    assert reindex(root) == []
    _damage(root, "cost_samples")
    with History(root) as h:  # the file opens: its first pages are whole
        assert "tonight" in h.run_ids()
        with pytest.raises(StoreError, match=r"cannot read the run history .*history\.sqlite"):
            h.series("nightly", lane="cost")
    record, replays = read_record(run), load_replays(run)
    told: list[str] = []
    floor = history_floor(run, record, replays, notify=told.append)
    assert floor.noise == {} and floor.note.startswith("not read: ")
    assert "malformed" in floor.note and len(told) == 1
    moves = against_history(run, record, notify=told.append)
    assert moves is not None and "cannot read the run history" in moves.error
    assert len(told) == 2 and "not set against its lab's history" in told[1]


def _scoped_run(root: Path, tmp: Path, run_id: str, day: int, scope: str, cycles: float) -> Path:
    """A run whose replays of l.i0 were counted in `scope`."""
    run = a_run(root, tmp, run_id, day, {})
    rng = random.Random(day)
    for label in ("base", "head"):
        for n in (1, 2, 3):
            value = cycles * (1 + rng.gauss(0, 0.001))
            replay: Any = counted(label, n, value, scope=scope)
            save_replay(run, label, n, replay)
    return run


@pytest.mark.parametrize("scope", ["engine", "engine-calls"])
def test_a_count_of_another_scope_is_a_boundary_not_a_move(tmp_path: Path, scope: str) -> None:
    root = tmp_path / "results"
    for night in (1, 2, 3, 4):
        _scoped_run(root, tmp_path, f"night-{night}", night, "engine-calls", 1e4)
    # Tonight 30% more: counted the whole engine (the split failed), or as before.
    tonight = _scoped_run(root, tmp_path, "tonight", 5, scope, 1.3e4)
    assert reindex(root) == []
    with History(root) as h:
        (series, *_) = h.series("nightly", "l.i0", lane="cost")
        methods = [p.method for p in series.points]
        assert len(set(methods[:4])) == 1 and (methods[4] == methods[0]) == (scope != "engine")
        assert methods[0] is not None and methods[0].endswith(" scope engine-calls")
    moves = against_history(tonight, read_record(tonight), notify=pytest.fail)
    assert moves is not None
    cost = {(m.column, m.change.verdict) for m in moves.moved if m.lane == "cost"}
    if scope == "engine":  # another scope counts other code: a boundary, no move
        assert cost == set()
    else:  # the same 30% counted in the same scope is a move
        assert cost == {("base", "slower"), ("head", "slower")}


def _basedir(root: Path, body: str = "") -> Path:
    """A PostgreSQL basedir whose binaries say version 16.4; `body` changes the binary."""
    (root / "bin").mkdir(parents=True, exist_ok=True)
    for name in ("initdb", "postgres"):
        script = root / "bin" / name
        script.write_text(f"#!/bin/sh\n{body}\necho 'postgres (PostgreSQL) 16.4'\n")
        script.chmod(0o755)
    return root


def test_a_rebuilt_local_build_is_another_build(tmp_path: Path) -> None:
    basedir = _basedir(tmp_path / "pg")
    first = provision.fetch(BuildSpec("postgres", str(basedir)))
    digest = hashlib.sha256((basedir / "bin" / "postgres").read_bytes()).hexdigest()
    assert first.identity["binary_sha256"] == digest[:16]
    _basedir(basedir, body=": rebuilt at another commit")  # same path, same version line
    rebuilt = provision.fetch(BuildSpec("postgres", str(basedir)))
    assert rebuilt.version_string == first.version_string
    assert rebuilt.identity["path"] == first.identity["path"]
    assert method.build_key(rebuilt.identity) != method.build_key(first.identity)
    # The MySQL family's server binary too.
    line = "Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)"
    mysqld = tmp_path / "my" / "bin" / "mysqld"
    mysqld.parent.mkdir(parents=True)
    mysqld.write_text(f'#!/bin/sh\necho "$0  {line}"\n')
    mysqld.chmod(0o755)
    my = provision.fetch(BuildSpec.parse(f"mysql@{tmp_path / 'my'}"))
    assert len(str(my.identity["binary_sha256"])) == 16


def test_a_local_build_that_does_not_pin_its_binary_gets_no_history_floor(
    tmp_path: Path,
) -> None:
    """A path build recorded before its binary was digested: no build key, no floor
    from the earlier counts made at that path (they may be of another commit)."""
    unpinned = {"source": "path", "path": "/src/pg", "version_string": "postgres 17.2"}
    assert method.build_key(unpinned) is None
    assert method.build_key({**unpinned, "binary_sha256": "ab" * 8}) is not None
    rocksdb = {"source": "path", "path": "/x/librocksdb.so", "sha256": "cd" * 32}
    assert method.build_key(rocksdb) is not None
    builds = {"base": unpinned, "head": unpinned}
    root = tmp_path / "results"
    for night in (1, 2, 3):
        a_run(root, tmp_path, f"night-{night}", night, {"base": [1e4, 1.01e4]}, builds=builds)
    assert reindex(root) == []
    run = a_run(root, tmp_path, "tonight", 4, {"base": [1e4] * 3}, builds=builds)
    record, replays = read_record(run), load_replays(run)
    assert {c.build_key for c in floor_cells(record, replays)} == {None}
    floor = history_floor(run, record, replays, notify=pytest.fail)
    assert floor.noise == {} and "pins their code" in floor.note


def test_why_valgrinds_cpu_was_not_read_stays_out_of_the_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two different failures to read the presented CPU on one host give one identity;
    the failure is said on stderr."""
    tools = tmp_path / "tools"
    tools.mkdir()
    valgrind = tools / "valgrind"
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    found = []
    for script in ("#!/bin/sh\nexit 1\n", "#!/nonexistent/interpreter\n"):
        valgrind.write_text(script)
        valgrind.chmod(0o755)
        method.cpu_features.cache_clear()
        try:
            found.append(method.cpu_features())
        finally:
            method.cpu_features.cache_clear()
        err = capsys.readouterr().err
        assert err.startswith("note: the CPU features valgrind presents were not read (")
    assert found[0] == found[1] == method._host_flags()
    assert found[0] is not None and "(" not in found[0]
