"""Lab files: what they turn into, and the messages bad ones get."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbregress.execution.prepare import drops_at_start, drops_page_cache
from dbregress.lab.file import INSERT_STEPS, KV_STEPS, InsertSizes, KvSizes, Lab, load_lab
from dbregress.model.errors import LabError

GOOD = """\
name = "t"
[[column]]
label = "old"
build = "postgres@12.20.0"

[[column]]
label = "new"
build = "postgres@17.2.0"
config = "ci"
settings = { work_mem = "8MB", max_connections = 50 }

[insert]
clients = 2
load_rows = 1000
write_rows = 400
query_seconds = 2
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(text)
    return path


def test_good_lab(tmp_path: Path) -> None:
    lab = load_lab(write(tmp_path, GOOD))
    assert [c.label for c in lab.columns] == ["old", "new"]
    assert lab.columns[1].settings == {"work_mem": "8MB", "max_connections": "50"}
    assert lab.columns[0].config == "default"
    (comparison,) = lab.comparisons
    assert comparison.base.label == "old" and comparison.benchmark == "insert"
    assert isinstance(comparison.sizes, InsertSizes)
    assert comparison.sizes.clients == 2 and comparison.sizes.steps == INSERT_STEPS
    assert [j.name for j in lab.jobs()] == ["old/r0", *lab_round(lab, 1)]
    assert lab.jobs()[0].warmup and not lab.jobs()[1].warmup
    assert lab.placement.mode in ("separate", "same")
    assert str(lab.repeats) == "1" and lab.verdict.band == 0.05 and lab.order == "random"


def lab_round(lab: Lab, number: int) -> list[str]:
    return [j.name for j in lab.round(lab.comparisons[0], number)]


def test_same_build_twice_is_an_aa_comparison(tmp_path: Path) -> None:
    text = GOOD.replace("postgres@17.2.0", "postgres@12.20.0")
    lab = load_lab(write(tmp_path, text))
    assert lab.columns[0].build == lab.columns[1].build


def test_repeats_interleave_in_seeded_random_rounds(tmp_path: Path) -> None:
    lab = load_lab(write(tmp_path, "repeats = 8\nwarmup_job = false\n" + GOOD))
    names = [j.name for j in lab.jobs()]
    assert len(names) == 16
    for r in range(1, 9):  # every round runs every column once
        assert sorted(names[2 * r - 2 : 2 * r]) == [f"new/r{r}", f"old/r{r}"]
    firsts = {names[2 * r - 2].split("/")[0] for r in range(1, 9)}
    assert firsts == {"old", "new"}  # the order varies between rounds
    again = load_lab(write(tmp_path, "repeats = 8\nwarmup_job = false\n" + GOOD))
    assert [j.name for j in again.jobs()] == names  # and is the same for the same seed
    other = load_lab(write(tmp_path, "seed = 2\nrepeats = 8\nwarmup_job = false\n" + GOOD))
    assert [j.name for j in other.jobs()] != names


def test_fixed_order_keeps_the_lab_order(tmp_path: Path) -> None:
    lab = load_lab(write(tmp_path, 'order = "fixed"\nrepeats = 3\n' + GOOD))
    assert [j.name for j in lab.jobs()][1:] == [
        f"{c}/r{r}" for r in (1, 2, 3) for c in ("old", "new")
    ]


def test_repeat_ranges_and_verdict_policy(tmp_path: Path) -> None:
    text = 'repeats = "3..10"\n' + GOOD.replace(
        "[insert]", "[verdict]\nalpha = 0.01\nband = 0.03\n[insert]"
    )
    lab = load_lab(write(tmp_path, text))
    assert (lab.repeats.minimum, lab.repeats.maximum) == (3, 10)
    assert str(lab.repeats) == "3..10"
    assert (lab.verdict.alpha, lab.verdict.band) == (0.01, 0.03)


def test_a_band_narrower_than_the_default_small_floor_is_taken(tmp_path: Path) -> None:
    """A tiny cost_band alone (a test lab's) is no error: no change can be small there."""
    text = GOOD.replace("[insert]", "[verdict]\ncost_band = 0.000001\n[insert]")
    assert load_lab(write(tmp_path, text)).verdict.cost_band == 0.000001


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('repeats = "3-10"', "neither a number nor a range"),
        ('repeats = "5..3"', "0 < MIN <= MAX"),
        ("repeats = 0", "greater than 0"),
        ('order = "sorted"', "unknown value 'sorted'; use one of random, fixed"),
        ('schedule = "turns"', "unknown value 'turns'; use one of jobs, interleaved"),
        ("slice_ms = 5", "slice_ms"),
        ("[verdict]\nband = 1.5", "verdict.band: must be between 0.0 and 1.0"),
        ("[verdict]\nalphaa = 0.1", "unknown key 'alphaa'"),
        ("[verdict]\ncost_small_floor = 0.02", "cost_small_floor: must be below cost_band"),
    ],
)
def test_bad_repeats_and_policy(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(LabError, match=message):
        load_lab(write(tmp_path, line + "\n" + GOOD.split("\n", 1)[1]))


def test_inject_slowdown_and_warmup(tmp_path: Path) -> None:
    text = GOOD.replace('config = "ci"', 'config = "ci"\ninject_slowdown = 0.1')
    text = text.replace("query_seconds = 2", "query_seconds = 2\nwarmup_s = 1.5")
    lab = load_lab(write(tmp_path, text))
    assert lab.columns[1].inject_slowdown == 0.1 and lab.columns[0].inject_slowdown == 0
    assert lab.comparisons[0].sizes.warmup_s == 1.5
    bad = GOOD.replace('config = "ci"', 'config = "ci"\ninject_slowdown = -1')
    with pytest.raises(LabError, match="inject_slowdown: must be a fraction"):
        load_lab(write(tmp_path, bad))


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("clients = 2", "clients = 0", r"lab.toml:13: insert.clients: must be greater than 0"),
        ("clients = 2", 'clients = "2"', r"lab.toml:13: insert.clients: expected an integer"),
        ("query_seconds = 2", "query_secs = 2", r"lab.toml:16: insert.query_secs: unknown key"),
        ('label = "new"', 'label = "old"', r"lab.toml:7: column\[1\].label: .*used twice"),
        ("postgres@17.2.0", "mongodb@7", r"lab.toml:8: column\[1\].build: unknown engine"),
        ("postgres@17.2.0", "postgres17", r"column\[1\].build: .*ENGINE@VERSION"),
        ('name = "t"', 'name = "t"\nplacement = "diagonal"', r"lab.toml:2: placement: unknown"),
        ("[insert]", '[insert]\nsteps = ["qp100", "l.i0"]', r"insert.steps: .*order"),
        ("[insert]", '[insert]\nsteps = ["l.i0", "qz9"]', r"insert.steps: unknown step 'qz9'"),
        ("[insert]", '[insert]\nsteps = ["l.x"]', r"must start with l.i0"),
    ],
)
def test_bad_lab_names_file_line_and_key(tmp_path: Path, old: str, new: str, expect: str) -> None:
    assert old in GOOD
    with pytest.raises(LabError, match=expect):
        load_lab(write(tmp_path, GOOD.replace(old, new, 1)))


def test_placement_table(tmp_path: Path) -> None:
    lab = load_lab(write(tmp_path, 'placement = { server = "0", client = "0" }\n' + GOOD))
    assert lab.placement.mode == "same"
    assert lab.placement.server_cpus == frozenset({0})
    with pytest.raises(LabError, match=r"placement.client: CPUs \[999\] are not available"):
        load_lab(write(tmp_path, 'placement = { server = "0", client = "999" }\n' + GOOD))


def test_not_toml(tmp_path: Path) -> None:
    with pytest.raises(LabError, match=r"lab.toml: not valid TOML: .*line 2"):
        load_lab(write(tmp_path, 'name = "x"\n[[column]\n'))


def test_no_columns(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="missing required key 'column'"):
        load_lab(write(tmp_path, 'name = "x"\n'))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="cannot read lab file"):
        load_lab(tmp_path / "nope.toml")


def test_shipped_labs_parse() -> None:
    paths = sorted(Path(__file__).parents[2].joinpath("labs").glob("*.toml"))
    assert any(p.name == "quickstart.toml" for p in paths)  # `make demo` runs it
    for path in paths:
        assert load_lab(path).columns, path


TWO = """\
name = "two"

[[comparison]]
name = "kv"
benchmark = "kv"
[[comparison.column]]
label = "r7"
build = "rocksdb@7.10.2"
[[comparison.column]]
label = "r10"
build = "rocksdb@10.2.1"
config = "iodir"
settings = { cache_type = "hyper_clock", block_align = false }
[comparison.kv]
keys = 1000
seconds = 2

[[comparison]]
name = "pg"
[[comparison.column]]
label = "pg12"
build = "postgres@12.20.0"
[comparison.insert]
load_rows = 100
"""


def test_several_comparisons(tmp_path: Path) -> None:
    lab = load_lab(write(tmp_path, TWO))
    kv, pg = lab.comparisons
    assert (kv.name, kv.benchmark, pg.name, pg.benchmark) == ("kv", "kv", "pg", "insert")
    assert isinstance(kv.sizes, KvSizes) and kv.sizes.keys == 1000
    assert kv.sizes.steps == KV_STEPS
    assert kv.columns[0].config == "byrx"  # RocksDB's default preset
    assert kv.columns[1].settings == {"cache_type": "hyper_clock", "block_align": "false"}
    names = [j.name for j in lab.jobs()]
    assert names[0] == "r7/r0" and sorted(names[1:3]) == ["r10/r1", "r7/r1"]
    assert names[3:] == ["pg12/r0", "pg12/r1"]  # each comparison has its warm-up job


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("keys = 1000", "keys = 0", r"lab.toml:15: comparison\[0\].kv.keys: must be greater"),
        ("seconds = 2", "secs = 2", r"lab.toml:16: comparison\[0\].kv.secs: unknown key"),
        ('label = "r10"', 'label = "pg12"', r"column label 'pg12' is used in two comparisons"),
        ('config = "iodir"', 'confg = "iodir"', r"lab.toml:12: comparison\[0\].column\[1\].confg"),
        ("load_rows = 100", "load_rows = -1", r"lab.toml:24: comparison\[1\].insert.load_rows"),
        (
            'benchmark = "kv"',
            'benchmark = "ycsb"',
            r"lab.toml:5: comparison\[0\].benchmark: unknown",
        ),
        ("[comparison.kv]", "[comparison.insert]", r"comparison\[0\].insert: a \[insert\] table"),
    ],
)
def test_bad_comparison_names_file_line_and_key(
    tmp_path: Path, old: str, new: str, expect: str
) -> None:
    assert old in TWO
    with pytest.raises(LabError, match=expect):
        load_lab(write(tmp_path, TWO.replace(old, new, 1)))


def test_top_level_columns_and_comparisons_do_not_mix(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="put this inside each of them"):
        load_lab(write(tmp_path, TWO + '\n[[column]]\nlabel = "x"\nbuild = "postgres@17.2.0"\n'))


def test_schedule_keys(tmp_path: Path) -> None:
    lab = load_lab(write(tmp_path, GOOD))
    assert lab.schedule == "jobs" and lab.slice_ms == 100
    lab = load_lab(write(tmp_path, 'schedule = "interleaved"\nslice_ms = 40\n' + GOOD))
    assert lab.schedule == "interleaved" and lab.slice_ms == 40


def test_a_comparison_with_a_storage_bound_column_drops_the_page_cache_unless_told(
    tmp_path: Path,
) -> None:
    # the timed run and explain's profiling replay decide it alike (prepare.drops_page_cache)
    kv = """name = "kv"
benchmark = "kv"
[[column]]
label = "a"
build = "rocksdb@7.10.2"
config = "byrx"
[[column]]
label = "b"
build = "rocksdb@10.2.1"
config = "byrx"
"""
    lab = load_lab(write(tmp_path, kv))
    assert not drops_page_cache(lab, lab.comparisons[0])
    iobuf = kv.replace('config = "byrx"\n', 'config = "iobuf"\n', 1)
    lab = load_lab(write(tmp_path, iobuf))
    assert drops_page_cache(lab, lab.comparisons[0])  # for the byrx column beside it too
    # a job's own start is decided per column (prepare.drops_at_start)
    assert [drops_at_start(lab, c) for c in lab.columns] == [True, False]
    lab = load_lab(write(tmp_path, "drop_caches = false\n" + iobuf))
    assert not drops_page_cache(lab, lab.comparisons[0])
    assert not any(drops_at_start(lab, c) for c in lab.columns)
    lab = load_lab(write(tmp_path, "drop_caches = true\n" + kv))
    assert drops_page_cache(lab, lab.comparisons[0])
    assert all(drops_at_start(lab, c) for c in lab.columns)
