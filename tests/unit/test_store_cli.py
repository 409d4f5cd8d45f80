"""dbregress store (cli/store.py): list, size and prune the store of counting replays
(store/counted.py), on a store made here with CountStore.put."""

from __future__ import annotations

import time
from pathlib import Path
from typing import cast

import pytest

from dbregress.cli.main import main
from dbregress.cli.store import age_text, root, size_text
from dbregress.method import identity as method
from dbregress.shapes.method import MethodIdentity
from dbregress.shapes.replay import ReplayRecord
from dbregress.store import counted
from dbregress.store.counted import CountKey, CountStore
from tests.unit.test_count_store import IDENTITY

DAY = 86_400.0
OTHER: MethodIdentity = {**IDENTITY, "valgrind": "valgrind-3.22.0"}
WINDOW = {
    "readrandom": {
        "index": 2,
        "skip_ops": 30_000,
        "ops": 1000,
        "q_per_s": 1e5,
        "warm_ops": 0,
        "until_hit_rate": 0.0,
    }
}


def _record(build: str, identity: MethodIdentity) -> ReplayRecord:
    return cast(
        ReplayRecord,
        {
            "comparison": "c",
            "column": "a",
            "replay": 1,
            "build": build,
            "method_identity": dict(identity),
            "status": "ok",
            "steps": {"readrandom": {"per_op": {"instructions": 10_000.0}, "divisor": 1e3}},
            "took_s": 6.0,
        },
    )


def _key(build_key: str, identity: MethodIdentity) -> CountKey:
    count = method.count_key(identity)
    assert count is not None
    return CountKey(build_key, count, ("step-a", "step-b"), "profile")


def _put(
    store: CountStore,
    build: str,
    build_key: str,
    run: str,
    age_days: float,
    identity: MethodIdentity = IDENTITY,
    replay: int = 1,
) -> Path:
    origin = {"run": run, "column": "a", "replay": replay, "host": None}
    origin["stored_at"] = time.time() - age_days * DAY
    path = store.put(_key(build_key, identity), build, WINDOW, _record(build, identity), origin)
    assert path is not None
    return path


@pytest.fixture
def store(tmp_path: Path) -> CountStore:
    """Two builds; rocksdb@7.10.2 under two counting methods, one of them 40 days old."""
    s = CountStore(tmp_path / "count-store")
    _put(s, "rocksdb@7.10.2", "b7aaaaaaaa", "run-old", 40, OTHER)
    _put(s, "rocksdb@7.10.2", "b7aaaaaaaa", "run-1", 2)
    _put(s, "rocksdb@7.10.2", "b7aaaaaaaa", "run-2", 1, replay=2)
    _put(s, "rocksdb@8.0.0", "b8bbbb", "run-2", 1)
    return s


def _store(s: CountStore, *args: str) -> int:
    return main(["store", "--store", str(s.root), *args])


def _files(s: CountStore) -> int:
    return s.size()[0]


def _corrupt(s: CountStore) -> Path:
    """A stored entry cut short, as a full disk without atomic writes would leave it."""
    path = _put(s, "rocksdb@9.0.0", "b9cccc", "run-3", 0)
    path.write_text(path.read_text()[:100])
    return path


def test_list_shows_a_row_per_key_builds_in_order_newest_first(
    store: CountStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _store(store, "list") == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| rocksdb@")]
    assert len(rows) == 3
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    count = method.count_key(IDENTITY) or ""
    other = method.count_key(OTHER) or ""
    # rocksdb@7.10.2's newer key (two replays, runs 1 and 2) before its 40-day-old one
    assert cells[0][:5] == ["rocksdb@7.10.2", count[:12], "readrandom", "2", "run-1, run-2"]
    assert cells[0][5] == "1d"
    assert cells[1][:5] == ["rocksdb@7.10.2", other[:12], "readrandom", "1", "run-old"]
    assert cells[1][5] == "40d"
    assert cells[2][0] == "rocksdb@8.0.0"
    total_bytes = store.size()[1]
    assert sum(int(c[6]) for c in cells) == total_bytes
    assert out.strip().splitlines()[-1].startswith("4 replays, 3 keys, ")
    assert str(store.root) in out.strip().splitlines()[-1]


def test_list_of_a_missing_or_empty_store_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["store", "--results", str(tmp_path), "list"]) == 0
    assert f"No count store at {tmp_path / 'count-store'}" in capsys.readouterr().out
    (tmp_path / "count-store").mkdir()
    assert main(["store", "list", "--results", str(tmp_path)]) == 0
    assert "holds no usable replay" in capsys.readouterr().out


def test_size_counts_every_file_and_the_unusable_ones(
    store: CountStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _store(store, "size") == 0
    out = capsys.readouterr().out
    files, total = store.size()
    assert f"{files} entries, {total} bytes" in out and "No entry is unusable" in out
    bad = _corrupt(store)
    assert _store(store, "size") == 0
    out = capsys.readouterr().out
    assert "5 entries" in out and "1 entry unusable" in out
    assert bad.name in out and "unreadable" in out
    # list leaves it out and says it is there
    assert _store(store, "list") == 0
    out = capsys.readouterr().out
    assert "rocksdb@9.0.0" not in out and "1 entry unusable" in out


def test_prune_older_than_removes_only_old_entries(
    store: CountStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _store(store, "prune", "--older-than", "30") == 0
    assert "Removed 1 entry," in capsys.readouterr().out
    left = [f.stored for f in store.survey() if f.stored is not None]
    assert len(left) == 3 and all(s.origin["run"] != "run-old" for s in left)
    # its key's folder went with it
    assert len({s.path.parent for s in left}) == len(list(store.root.glob("*/*")))


def test_prune_by_build_name_or_build_key(store: CountStore) -> None:
    assert _store(store, "prune", "--build", "rocksdb@8.0.0") == 0
    assert {f.build for f in store.survey()} == {"rocksdb@7.10.2"}
    assert _store(store, "prune", "--build", "b7a") == 0  # too short a start to match by
    assert _files(store) == 3
    assert _store(store, "prune", "--build", "b7aaaaaa") == 0
    assert _files(store) == 0


def test_prune_by_identity_and_criteria_combine(store: CountStore) -> None:
    other = (method.count_key(OTHER) or "")[:8]
    # AND: the other method's entries of rocksdb@8.0.0: none
    assert _store(store, "prune", "--identity", other, "--build", "rocksdb@8.0.0") == 0
    assert _files(store) == 4
    assert _store(store, "prune", "--identity", other) == 0
    assert _files(store) == 3
    assert all(f.count_key == method.count_key(IDENTITY) for f in store.survey())


def test_dry_run_lists_and_removes_nothing(
    store: CountStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _store(store, "prune", "--build", "rocksdb@7.10.2", "--dry-run") == 0
    out = capsys.readouterr().out
    assert out.startswith("Would remove 3 of 4 entries")
    assert out.count("rocksdb@7.10.2,") == 3
    assert _files(store) == 4


def test_prune_unusable_removes_the_corrupt_entry_only(
    store: CountStore, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _corrupt(store)
    assert _store(store, "prune", "--unusable") == 0
    assert "Removed 1 entry," in capsys.readouterr().out
    assert not bad.exists() and not bad.parent.exists()
    assert _files(store) == 4 and all(f.why is None for f in store.survey())


def test_prune_without_a_criterion_is_an_error_naming_them(
    store: CountStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _store(store, "prune") == 2
    err = capsys.readouterr().err
    for option in ("--older-than", "--build", "--identity", "--unusable"):
        assert option in err
    assert _store(store, "prune", "--older-than", "-1") == 2
    assert _store(store, "prune", "--older-than", "nan") == 2
    assert _store(store, "prune", "--build", " ") == 2
    assert _files(store) == 4


def test_which_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(counted.ENV, raising=False)
    assert root(None, None) == Path("results") / "count-store"
    assert root(None, tmp_path) == tmp_path / "count-store"
    monkeypatch.setenv(counted.ENV, str(tmp_path / "shared"))
    assert root(None, None) == tmp_path / "shared"
    assert root(tmp_path / "s", None) == tmp_path / "s"
    assert main(["store", "--store", "a", "--results", "b", "size"]) == 2


def test_sizes_and_ages_read_as_people_read_them() -> None:
    assert [size_text(n) for n in (512, 3 * 1024 + 400, 5 * 1024**2)] == [
        "512 B",
        "3.4 KiB",
        "5.0 MiB",
    ]
    assert [age_text(s) for s in (-3, 40, 720, 5 * 3600, 3 * DAY)] == [
        "0s",
        "40s",
        "12m",
        "5h",
        "3d",
    ]
