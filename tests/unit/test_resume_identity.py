"""One method per figure: `dbregress run --resume` continues a run only under the method
identity that started it, and refuses with one line naming what differs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbregress.cli.main import main
from dbregress.lab.file import load_lab
from dbregress.method import identity as method
from dbregress.model.errors import StoreError
from dbregress.store.files import write_json
from dbregress.store.run import RunWriter, read_record

LAB = """\
name = "resumed"
placement = "unpinned"
repeats = 1
warmup_job = false
count = false
benchmark = "kv"
[[column]]
label = "a"
build = "null@0"
[[column]]
label = "b"
build = "null@0"
[kv]
keys = 1000
steps = ["fillseq"]
"""


def interrupted(tmp_path: Path) -> Path:
    """A run folder as an interrupted run leaves it (status interrupted)."""
    lab_path = tmp_path / "lab.toml"
    lab_path.write_text(LAB)
    writer = RunWriter(tmp_path / "results", load_lab(lab_path), {"hostname": "here"})
    writer.finish("interrupted")
    return writer.path


def recorded_as(run: Path, **changes: str) -> None:
    record = read_record(run)
    record["method_identity"] = {**record["method_identity"], **changes}  # type: ignore[typeddict-item]
    write_json(run / "run.json", record)


def test_the_same_method_resumes(tmp_path: Path) -> None:
    run = interrupted(tmp_path)
    writer = RunWriter.reopen(run, load_lab(run / "lab.toml"))
    assert writer.record["status"] == "running" and len(writer.record["resumed_at"]) == 1


def test_another_method_is_refused_in_one_line(tmp_path: Path) -> None:
    run = interrupted(tmp_path)
    now = method.identity()
    recorded_as(run, dbregress=now["dbregress"].removesuffix("-dirty") + "-dirty-before")
    lab = load_lab(run / "lab.toml")
    with pytest.raises(StoreError) as e:
        RunWriter.reopen(run, lab)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"cannot resume {run}")
    assert "dbregress version" in text and "-dirty-before ->" in text
    assert read_record(run)["status"] == "interrupted"  # refused before anything changed
    # Another CPU as valgrind presents it is another method too (the counts depend on it).
    recorded_as(run, dbregress=now["dbregress"], cpu_features="skylake, cpuid 0")
    with pytest.raises(StoreError, match="CPU features valgrind presents skylake"):
        RunWriter.reopen(run, lab)
    # A run that recorded no method: not known to be the same, refused.
    record = read_record(run)
    del record["method_identity"]
    write_json(run / "run.json", record)
    with pytest.raises(StoreError, match=r"method not recorded before"):
        RunWriter.reopen(run, lab)


def test_the_cli_refuses_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = interrupted(tmp_path)
    recorded_as(run, loadgen_sha256="0123456789abcdef")
    code = main(["run", "--resume", str(run), "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("Error: cannot resume")
    assert "loadgen binary 0123456789abcdef ->" in err[0]
    assert f"dbregress run {run / 'lab.toml'}" in err[0]


def test_a_resumed_run_refuses_another_build_under_a_column(tmp_path: Path) -> None:
    """A build that became another since the run began (a new cache key: dbregress's
    fixed options, the compiler or the commit moved) is refused for a column whose jobs
    finished, naming what differs; the same build fetched again (other path, cache hit,
    build time) is not, nor a column none of whose jobs finished, nor a fleet's."""
    run = interrupted(tmp_path)
    built = {"source": "src", "commit": "c0ffee", "cache_key": "src-c0ffee-rel-aaa", "spec": "x"}
    moved = {**built, "cache_key": "src-c0ffee-rel-bbb"}
    record = read_record(run)
    record["builds"] = {"a": built, "b": built}
    record["jobs"]["a/r1"] = {"status": "ok"}
    write_json(run / "run.json", record)
    writer = RunWriter.reopen(run, load_lab(run / "lab.toml"))
    writer.set_build("a", {**built, "path": "/elsewhere", "cache_hit": "yes", "build_s": "3"})
    writer.set_build("b", moved)  # nothing of b measured yet
    with pytest.raises(StoreError) as e:
        writer.set_build("a", moved)
    text = str(e.value)
    assert "\n" not in text and "cache_key 'src-c0ffee-rel-aaa' -> 'src-c0ffee-rel-bbb'" in text
    assert read_record(run)["builds"]["a"]["cache_key"] == "src-c0ffee-rel-aaa"
    # a new run's writer, and a fleet's (each host builds with its own compiler), take any
    fresh = RunWriter(tmp_path / "results", load_lab(run / "lab.toml"), {"hostname": "here"})
    fresh.set_build("a", built)
    fresh.set_build("a", moved)
    record = read_record(run)
    record["hosts"] = {"w1": {}}  # type: ignore[typeddict-item]
    write_json(run / "run.json", record)
    RunWriter.reopen(run, load_lab(run / "lab.toml")).set_build("a", moved)
