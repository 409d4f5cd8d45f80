"""examples/nightly.py, the nightly recipe: its lab, its state file, its exit statuses,
and whole nights against a stand-in for the dbregress command (a small script that
answers each subcommand as a test asks), so every path runs in well under a second."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dbregress.lab.file import load_lab

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "nightly.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nightly_recipe", RECIPE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


nightly = _load()

# Stands in for `dbregress`: FAKE (JSON in the environment) gives each subcommand's exit
# status, the verdicts a run writes, whether the run indexes itself in the history (as
# `dbregress run` does; "unindexed": it does not), which fetch fails ("fetch_fails": a
# part of its build) and the ledger's JSON; every call is appended to calls.jsonl.
FAKE = """\
import json, os, sys, tomllib
from pathlib import Path
args = sys.argv[1:]
mode = json.loads(os.environ.get("FAKE", "{}"))
log = Path(os.environ["FAKE_CALLS"])
with log.open("a") as f:
    f.write(json.dumps(args) + "\\n")
def results():
    return Path(args[args.index("--results") + 1])
cmd = args[0]
if cmd == "fetch" and mode.get("fetch_fails") and mode["fetch_fails"] in args[1]:
    sys.exit(2)
if cmd == "run":
    lab = tomllib.loads(Path(args[1]).read_text())
    n = len(list(results().glob("*-" + lab["name"])))
    run = results() / f"20260101-00000{n}-{lab['name']}"
    run.mkdir(parents=True)
    (run / "verdicts.json").write_text(json.dumps(mode.get("verdicts", {})))
    if not mode.get("unindexed"):
        with (results() / "index.txt").open("a") as f:
            f.write(run.name + "\\n")
    print("run " + run.name, file=sys.stderr)
elif cmd == "history":
    index = results() / "index.txt"
    print(" ".join(index.read_text().split()) if index.exists() else "")
elif cmd == "ledger":
    print(json.dumps(mode.get("ledger_json", {"drift": {"limit": 0.01, "beyond": []}})))
elif cmd == "bisect":
    folder = results() / f"bisect-{len(list(results().glob('bisect-*')))}-x"
    folder.mkdir()
    first_bad = "postgres@src:" + args[2] + "#" + args[4] + "+rel"
    (folder / "bisect.json").write_text(json.dumps({"first_bad": first_bad}))
sys.exit(mode.get(cmd, 0))
"""


def _verdicts(*steps: tuple[str, str | None, float | None, str | None, float | None]) -> Any:
    """verdicts.json with a head column: (step, time word, QPS ratio, cost word, ratio)."""
    rows = []
    for step, word, ratio, cost_word, cost_ratio in steps:
        row: dict[str, Any] = {"step": step, "verdict": word, "ratio": ratio}
        if cost_word:
            row["cost"] = {"verdict": cost_word, "ratio": cost_ratio}
        rows.append(row)
    return {"comparisons": [{"columns": [{"label": "head", "steps": rows}]}]}


def _git(tree: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    done = subprocess.run(
        ["git", "-C", str(tree), *ident, *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A git checkout of three commits."""
    repo = tmp_path / "tree"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    for i in range(3):
        _git(repo, "commit", "-q", "--allow-empty", "-m", f"commit {i}")
    return repo


class Setup:
    def __init__(self, tmp_path: Path, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tree, self.results = tree, tmp_path / "results"
        self.calls = tmp_path / "calls.jsonl"
        fake = tmp_path / "fake_dbregress.py"
        fake.write_text(FAKE)
        self.dbregress = f"{sys.executable} {fake}"
        monkeypatch.setenv("FAKE_CALLS", str(self.calls))
        self.monkeypatch = monkeypatch

    def night(self, ref: str, *extra: str, **mode: Any) -> int:
        self.monkeypatch.setenv("FAKE", json.dumps(mode))
        self.calls.write_text("")
        argv = ["--tree", str(self.tree), "--ref", ref, "--results", str(self.results)]
        return int(nightly.main([*argv, "--dbregress", self.dbregress, *extra]))

    def called(self) -> list[list[str]]:
        return [json.loads(line) for line in self.calls.read_text().splitlines()]

    def state(self) -> Any:
        return json.loads((self.results / "nightly" / "state.json").read_text())


@pytest.fixture
def setup(tmp_path: Path, tree: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    return Setup(tmp_path, tree, monkeypatch)


def test_arguments_default_to_the_engine_s_lab_and_the_results_site(tmp_path: Path) -> None:
    args = nightly.parse_args(["--tree", str(tmp_path), "--results", str(tmp_path / "r")])
    assert args.name == "nightly-postgres"
    assert args.site_out == tmp_path / "r" / "site"
    assert (args.against, args.gate, args.flavor, args.ref) == (
        "last-good",
        "slower",
        "rel",
        "HEAD",
    )
    with pytest.raises(SystemExit):
        nightly.parse_args(["--tree", str(tmp_path), "--against", "base"])
    with pytest.raises(SystemExit):
        nightly.parse_args(["--tree", str(tmp_path), "--engine", "sqlite"])


def test_the_built_in_lab_has_a_base_and_a_head_column_in_both_lanes() -> None:
    base = nightly.source_build("postgres", Path("/src/pg"), "a" * 40, "rel")
    text = nightly.write_lab(nightly.INSERT_LAB, "n", base, "postgres@src:/src/pg#b+rel", "x")
    lab = tomllib.loads(text)
    assert lab["name"] == "n" and lab["benchmark"] == "insert" and lab["count"] is True
    assert [(c["label"], c["build"]) for c in lab["column"]] == [
        ("base", f"postgres@src:/src/pg#{'a' * 40}+rel"),
        ("head", "postgres@src:/src/pg#b+rel"),
    ]
    assert lab["insert"]["steps"][0] == "l.i0" and "qp100" in lab["insert"]["steps"]
    assert tomllib.loads(nightly.write_lab(nightly.KV_LAB, "k", "a", "b", ""))["kv"]["keys"]


@pytest.mark.parametrize("template", ["INSERT_LAB", "KV_LAB"])
def test_both_built_in_labs_load_as_dbregress_reads_labs(template: str, tmp_path: Path) -> None:
    lab_file = tmp_path / "lab.toml"
    lab_file.write_text(nightly.write_lab(getattr(nightly, template), "n", "null@a", "null@b", ""))
    lab = load_lab(lab_file)
    assert lab.name == "n" and lab.count is True
    assert [c.label for c in lab.comparisons[0].columns] == ["base", "head"]


def test_a_template_s_unknown_placeholder_or_missing_column_is_an_error() -> None:
    with pytest.raises(nightly.RecipeError, match=r"unknown placeholder 'HAED_BUILD'"):
        nightly.write_lab("b = '${BASE_BUILD}' h = '${HAED_BUILD}'", "n", "a", "b", "")
    with pytest.raises(nightly.RecipeError, match="HEAD_BUILD"):
        nightly.write_lab("b = '${BASE_BUILD}'", "n", "base@1", "head@2", "")
    text = nightly.write_lab("x = '$$1 ${BASE_BUILD} ${HEAD_BUILD}'", "n", "a@1", "b@2", "")
    assert text == "x = '$1 a@1 b@2'"


def test_a_green_night_becomes_the_last_good_and_a_red_one_does_not() -> None:
    state = nightly.load_state(Path("/nonexistent/state.json"))
    green = {"night": "n1", "lab": "L", "commit": "c1", "run": "r1", "ended": "t1", "status": 0}
    nightly.record_night(state, green)
    red = {**green, "night": "n2", "commit": "c2", "run": "r2", "status": 1}
    nightly.record_night(state, red)
    nightly.record_night(state, {**red, "outcome": "regression"})  # the same night again
    assert state["last_good"] == {"L": {"commit": "c1", "run": "r1", "date": "t1", "night": "n1"}}
    assert [n["night"] for n in state["nights"]] == ["n1", "n2"]
    state["nights"].append({"night": "n3", "outcome": "running"})
    nightly.mark_unfinished(state)
    assert state["nights"][-1]["outcome"] == "killed"


def test_the_gate_s_status_is_the_recipe_s_and_anything_else_a_failure() -> None:
    assert [nightly.gate_status(c) for c in (0, 1, 2, 3, 130, -1, None)] == [0, 1, 2, 3, 3, 3, 3]


def test_the_steps_to_bisect_put_the_cost_lane_first_then_the_biggest_change() -> None:
    verdicts = _verdicts(
        ("l.i0", "slower", 0.5, "same", 1.0),
        ("qr100", "same", 1.0, "slower", 1.2),
        ("qp100", "slower", 0.9, "slower", 1.7),
        ("l.x", "undecided", None, None, None),
    )
    assert nightly.slower_steps(verdicts, "slower") == [
        ("qp100", "cost", 1.7),
        ("qr100", "cost", 1.2),
        ("l.i0", "time", 0.5),  # the QPS ratio, as verdicts.json gives it
    ]
    assert [s for s, _, _ in nightly.slower_steps(verdicts, "slower:time")] == ["l.i0", "qp100"]


def test_the_base_is_the_last_good_night_then_base(tree: Path) -> None:
    args = nightly.parse_args(["--tree", str(tree)])
    with pytest.raises(nightly.RecipeError, match="--base"):
        nightly.choose_base(args, {"last_good": {}})
    args.base = "postgres@17.2.0"
    assert nightly.choose_base(args, {"last_good": {}})[:2] == ("postgres@17.2.0", None)
    good = {"nightly-postgres": {"commit": "c" * 40, "night": "n1"}}
    build, commit, _ = nightly.choose_base(args, {"last_good": good})
    assert (build, commit) == (f"postgres@src:{tree}#{'c' * 40}+rel", "c" * 40)
    args.against, args.base = "base", "HEAD~2"
    assert nightly.choose_base(args, {"last_good": good})[1] == _git(tree, "rev-parse", "HEAD~2")


def test_the_bisection_takes_the_lab_s_sizes_config_and_own_flavor(tmp_path: Path) -> None:
    template = tmp_path / "lab.toml"
    args = nightly.parse_args(["--tree", str(tmp_path), "--flavor", "mine", "--lab", str(template)])
    lab = {"benchmark": "insert", "count_replays": 3, "column": [{"config": "ci"}] * 2}
    steps = ["l.i0", "l.x", "qp100"]
    lab |= {"insert": {"load_rows": 100, "steps": steps}, "flavors": {"postgres": {"mine": {}}}}
    cmd = nightly.bisect_command(args, lab, "good", "bad", "qp100", "cost")
    assert cmd[:6] == ["dbregress", "bisect", "--src", str(tmp_path), "good", "bad"]
    text = " ".join(cmd)
    assert "--step qp100 --lane cost" in text and "--replays 3 --config ci" in text
    assert "--direction slower" in text  # a regression, never a change the other way
    assert "--size load_rows=100" in text
    assert "--size steps=l.i0,l.x,qp100" in text  # the night's steps, not the default ones
    assert f"--lab {template}" in text


def test_a_dry_run_prints_the_commands_and_writes_nothing(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results2 = tmp_path / "r2"
    argv = ["--tree", str(tree), "--results", str(results2), "--base", "HEAD~2", "--dry-run"]
    assert nightly.main(argv) == 0
    out = capsys.readouterr().out
    head = _git(tree, "rev-parse", "HEAD")
    assert f"dbregress fetch 'postgres@src:{tree}#{head}+rel'" in out
    assert f"dbregress report RUN --results {results2} --fail-on slower" in out
    assert "dbregress bisect --src" in out and not results2.exists()


def test_green_nights_then_a_regression_bisected_since_the_last_good(setup: Setup) -> None:
    ids = _git(setup.tree, "rev-list", "--reverse", "HEAD").split()
    same = _verdicts(("qp100", "same", 1.0, "same", 1.0))
    assert setup.night("HEAD~1", "--base", "HEAD~2", verdicts=same) == 0
    first = setup.state()["nights"][-1]
    assert first["outcome"] == "green" and first["base_commit"] == ids[0]
    # the drift's reference is kept without --drift too (the site's ledger starts there)
    assert setup.state()["reference"]["nightly-postgres"]["run"] == first["run"]
    assert "ledger" not in [c[0] for c in setup.called()]
    night_dir = setup.results / "nightly" / first["night"]
    assert {p.name for p in night_dir.glob("*.log")} >= {"fetch-head.log", "run.log", "gate.log"}
    assert setup.night("HEAD~1") == 0  # nothing new: no run
    assert setup.state()["nights"][-1]["outcome"] == "unchanged"
    assert setup.called() == []
    slow = _verdicts(("qp100", "slower", 0.6, "slower", 1.7))
    assert setup.night("HEAD", verdicts=slow, report=1) == 1
    bisect = next(c for c in setup.called() if c[0] == "bisect")
    assert bisect[3:5] == [ids[1], ids[2]] and "--step" in bisect
    last = setup.state()["nights"][-1]
    assert last["outcome"] == "regression" and last["bisections"][0]["first_bad"].endswith(
        f"#{ids[2]}+rel"
    )
    assert [c[0] for c in setup.called()].count("site") == 2
    assert setup.state()["last_good"]["nightly-postgres"]["commit"] == ids[1]


def test_a_failed_build_is_3_a_failed_site_is_not_and_undecided_is_2(setup: Setup) -> None:
    assert setup.night("HEAD", "--base", "HEAD~2", fetch=2) == 3
    night = setup.state()["nights"][-1]
    assert night["outcome"] == "failed" and "fetch-base.log" in night["why"]
    assert "--against base" not in night["why"]  # no last good night: --base is the way
    assert setup.called()[-1][0] == "site"  # written after the failed night was recorded
    head = _git(setup.tree, "rev-parse", "HEAD")
    assert setup.night("HEAD", "--base", "HEAD~2", fetch_fails=head) == 3  # HEAD's build
    assert [c[0] for c in setup.called()] == ["fetch", "fetch", "site"]
    assert "the head build" in setup.state()["nights"][-1]["why"]
    # the real site, from the state file these nights wrote (no run, no history yet)
    from dbregress.site.write import build_site

    build_site(setup.results, setup.results / "site")
    index = (setup.results / "site" / "index.html").read_text()
    assert f"the last night {setup.state()['nights'][-1]['night']} was" in index
    assert "failed</b> (exit 3)" in index and head[:12] in index
    assert setup.night("HEAD", "--base", "HEAD~2", site=2, report=0) == 0
    assert setup.state()["nights"][-1]["site"].startswith("failed (exit 2")
    assert setup.night("HEAD", "--base", "HEAD~2", "--force", report=2) == 2
    assert setup.state()["nights"][-1]["outcome"] == "not judged"


def test_a_second_night_while_one_runs_exits_2(setup: Setup) -> None:
    with nightly.night_lock(setup.results / "nightly"):
        assert setup.night("HEAD", "--base", "HEAD~2") == 2
    assert not (setup.results / "nightly" / "state.json").exists()


def test_a_failure_of_the_results_folder_is_3_never_1(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51 item 22: an OSError (an unwritable results folder, a full disk) escaped
    as a traceback, which Python exits with 1, the status of a regression."""
    argv = ["--tree", str(setup.tree), "--base", "HEAD~2", "--dbregress", setup.dbregress]
    assert nightly.main([*argv, "--results", "/proc/x"]) == 3

    def full(path: Path, state: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(nightly, "save_state", full)
    assert setup.night("HEAD", "--base", "HEAD~2") == 3


def test_a_slower_lane_the_gate_does_not_judge_keeps_the_last_good_night(setup: Setup) -> None:
    """Issue 51 item 23: with --gate slower:cost, a time lane confirmed slower made the
    night the last good one, and the next night measured against the slow commit."""
    ids = _git(setup.tree, "rev-list", "--reverse", "HEAD").split()
    same = _verdicts(("qp100", "same", 1.0, "same", 1.0))
    assert setup.night("HEAD~1", "--base", "HEAD~2", verdicts=same) == 0
    time_slow = _verdicts(("qp100", "slower", 0.8, "same", 1.0))
    assert setup.night("HEAD", "--gate", "slower:cost", verdicts=time_slow) == 0
    night = setup.state()["nights"][-1]
    assert night["outcome"] == "green" and "qp100 (time 0.800)" in night["held"]
    assert setup.state()["last_good"]["nightly-postgres"]["commit"] == ids[1]
    assert setup.night("HEAD", "--gate", "slower:cost", verdicts=time_slow) == 0
    assert setup.called()[0][1].endswith(f"#{ids[1]}+rel")  # the same base again
    assert setup.night("HEAD", "--gate", "slower:cost", "--accept-ungated", verdicts=time_slow) == 0
    assert setup.state()["last_good"]["nightly-postgres"]["commit"] == ids[2]
    assert "accepted" in setup.state()["nights"][-1]["why"]


def test_a_run_the_history_lacks_is_not_judged(setup: Setup) -> None:
    """Issue 51 item 26: the stand-in history listed every run folder, so the path of a
    run `dbregress run` did not index was never taken."""
    same = _verdicts(("qp100", "same", 1.0, "same", 1.0))
    assert setup.night("HEAD", "--base", "HEAD~2", verdicts=same, unindexed=True) == 2
    assert "reindex" not in json.dumps(setup.called())
    assert setup.state()["last_good"] == {}
    assert setup.night("HEAD", "--base", "HEAD~2", verdicts=same) == 0
    assert setup.state()["last_good"]["nightly-postgres"]["run"].endswith("1-nightly-postgres")


def test_a_last_good_commit_that_no_longer_builds_says_the_way_forward(setup: Setup) -> None:
    """Issue 51 item 27: every night after failed at the base build with exit 3 and no
    way out; the failed night is recorded before the site is written, so it shows."""
    ids = _git(setup.tree, "rev-list", "--reverse", "HEAD").split()
    same = _verdicts(("qp100", "same", 1.0, "same", 1.0))
    assert setup.night("HEAD~1", "--base", "HEAD~2", verdicts=same) == 0
    assert setup.night("HEAD", fetch_fails=ids[1]) == 3
    night = setup.state()["nights"][-1]
    assert night["outcome"] == "failed" and "--against base --base REF" in night["why"]
    assert [c[0] for c in setup.called()] == ["fetch", "site"]
    assert setup.night("HEAD", "--against", "base", "--base", "HEAD~2", fetch_fails=ids[1]) == 0
    assert setup.state()["last_good"]["nightly-postgres"]["commit"] == ids[2]


def _ledger(
    tonight: int,
    *beyond: tuple[str, float, list[float], list[tuple[str, str, float]]],
    sized: tuple[str, ...] = ("qp100",),
) -> Any:
    """The ledger's JSON (format 1, the fields the recipe reads): tonight's run (the
    stand-in's `tonight`-th run) sized against the reference on the steps `sized`, and
    drift.beyond: (step, ratio, ci, [(run, commit, ratio)])."""
    run = f"20260101-00000{tonight}-nightly-postgres"
    figure = {"ratio": 1.0, "ci": [0.999, 1.001], "class": "same"}
    steps = [
        {"comparison": "insert", "step": step, "lane": "cost", "metric": "estimated_cycles",
         "points": [{"run": run, "column": "base", "cumulative": None, "increment": None},
                    {"run": run, "column": "head", "cumulative": figure if step in sized
                     else None, "increment": None}]}
        for step in ("qp100", "l.i0")
    ]  # fmt: skip
    rows = [
        {"comparison": "insert", "step": step, "ratio": ratio, "ci": ci,
         "contributors": [{"run": r, "commit": c, "ratio": x} for r, c, x in who]}
        for step, ratio, ci, who in beyond
    ]  # fmt: skip
    reference = {"run": "20260101-000000-nightly-postgres", "column": "base", "build": "b"}
    return {"lab": "nightly-postgres", "reference": reference, "steps": steps,
            "drift": {"limit": 0.01, "beyond": rows}}  # fmt: skip


def test_drift_since_the_reference_fails_the_night_and_names_who(setup: Setup) -> None:
    """Issue 50 item 2: each night passes against the last good night, while the steps
    drift since the fixed reference (the first night's run) beyond --drift."""
    same = _verdicts(("qp100", "same", 1.0, "same", 1.004))
    sized = _ledger(0, sized=("qp100", "l.i0"))
    assert setup.night("HEAD~1", "--base", "HEAD~2", "--drift", "1%", verdicts=same,
                       ledger_json=sized) == 0  # fmt: skip
    first = setup.state()["nights"][-1]
    ref = setup.state()["reference"]["nightly-postgres"]
    assert ref["run"] == first["run"] and ref["build"] == first["base"]
    ledger = next(c for c in setup.called() if c[0] == "ledger")
    assert ledger[ledger.index("--reference") + 1] == first["run"]
    assert ledger[ledger.index("--fail-on") + 1] == "drift:1%"
    head = _git(setup.tree, "rev-parse", "HEAD")
    drifted = _ledger(
        1,
        ("qp100", 1.012, [1.011, 1.013],
         [(first["run"], "a" * 40, 1.004), ("20260101-000001-nightly-postgres", head, 1.008)]),
        ("l.i0", 1.011, [1.009, 1.013], []),  # beyond, but its interval not all above 1%
        ("qr100", 0.97, [0.96, 0.98], []),  # beyond the faster way
    )  # fmt: skip
    assert setup.night("HEAD", "--drift", "1%", verdicts=same, ledger=1, ledger_json=drifted) == 1
    night = setup.state()["nights"][-1]
    assert night["outcome"] == "drift" and [d["step"] for d in night["drift"]["above"]] == ["qp100"]
    assert "qp100 +1.20% [+1.10, +1.30]" in night["why"]
    most = f"most from {night['night']} ({head[:12]}, +0.80%), {first['night']} (aaaaaaaaaaaa"
    assert most in night["why"]
    assert setup.state()["last_good"]["nightly-postgres"]["night"] == first["night"]
    assert setup.state()["reference"]["nightly-postgres"] == ref  # fixed, not the last good


def test_a_confirmed_drift_of_tonight_outranks_a_gate_that_did_not_judge(setup: Setup) -> None:
    """bench/nightly_drift.py: night 3's +1.0% since the reference was undecided against
    a 1% limit (not judged, so night 2 stayed the last good night); night 4 then moved
    +1.0% from night 2 (undecided: the gate exits 2) and +1.5% from the reference, its
    whole interval above: a confirmed drift, exit 1, as a confirmed slower step outranks
    a gap in dbregress's own gate. Only tonight's run's drift does: when the ledger's
    newest point is an older run's, the night stays not judged."""
    same, both = _verdicts(("qp100", "same", 1.0, "same", 1.004)), ("qp100", "l.i0")
    assert setup.night("HEAD~1", "--base", "HEAD~2", "--drift", "1%", verdicts=same,
                       ledger_json=_ledger(0, sized=both)) == 0  # fmt: skip
    first = setup.state()["nights"][-1]
    head = _git(setup.tree, "rev-parse", "HEAD")
    undecided = _verdicts(("qp100", "same", 1.0, "undecided", 1.010))

    def drifted(tonight: int, run: int) -> Any:
        found = _ledger(tonight, ("qp100", 1.015, [1.014, 1.016],
                                  [("20260101-000001-nightly-postgres", head, 1.005)]),
                        sized=both)  # fmt: skip
        found["drift"]["beyond"][0]["run"] = f"20260101-00000{run}-nightly-postgres"
        return found

    argv = ("HEAD", "--drift", "1%")
    assert setup.night(*argv, verdicts=undecided, report=2, ledger=1,
                       ledger_json=drifted(1, 1)) == 1  # fmt: skip
    night = setup.state()["nights"][-1]
    assert (night["outcome"], night["gate"], night["status"]) == ("drift", 2, 1)
    assert "qp100 +1.50% [+1.40, +1.60]" in night["why"]
    assert "the gate against the last good night did not judge every step" in night["why"]
    assert setup.state()["last_good"]["nightly-postgres"]["night"] == first["night"]
    # the ledger's newest point is not tonight's run: not judged, as the gate said
    assert setup.night(*argv, "--force", verdicts=undecided, report=2, ledger=1,
                       ledger_json=drifted(2, 1)) == 2  # fmt: skip
    assert setup.state()["nights"][-1]["outcome"] == "not judged"
    # within the limit, the gate's 2 stands
    assert setup.night(*argv, "--force", verdicts=undecided, report=2,
                       ledger_json=_ledger(3, sized=both)) == 2  # fmt: skip
    assert setup.state()["nights"][-1]["drift"]["judged"]


def test_drift_that_cannot_be_judged_is_2_and_within_the_limit_is_0(setup: Setup) -> None:
    """Not judged is not green: the ledger failed, answered 1 with nothing beyond, gave
    no reference (it read no run), or did not size tonight's run on a step."""
    same = _verdicts(("qp100", "same", 1.0, "same", 1.0))
    argv = ("--base", "HEAD~2", "--drift", "2%", "--force")
    assert setup.night("HEAD", *argv, verdicts=same, ledger=3) == 2
    assert "ledger exit 3" in setup.state()["nights"][-1]["drift"]["why"]
    assert setup.night("HEAD", *argv, verdicts=same, ledger=1, ledger_json=_ledger(1)) == 2
    assert setup.night("HEAD", *argv, verdicts=same, ledger_json={"drift": {}}) == 2
    no_ref = {**_ledger(3), "reference": None, "notes": ["run-0: not read"]}
    assert setup.night("HEAD", *argv, verdicts=same, ledger_json=no_ref) == 2
    assert "no reference run: run-0: not read" in setup.state()["nights"][-1]["drift"]["why"]
    assert setup.night("HEAD", *argv, verdicts=same, ledger_json=_ledger(4)) == 2  # l.i0
    assert "for insert/l.i0" in setup.state()["nights"][-1]["drift"]["why"]
    inside = _ledger(5, ("qp100", 1.015, [1.014, 1.016], []), sized=("qp100", "l.i0"))
    assert setup.night("HEAD", *argv, verdicts=same, ledger_json=inside) == 0
    with pytest.raises(SystemExit):
        nightly.parse_args(["--tree", ".", "--drift", "two"])
    assert nightly.parse_args(["--tree", ".", "--drift", "0.5%"]).drift == 0.005


def test_the_recipe_reads_what_dbregress_ledger_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The contract with `dbregress ledger --lab --reference --format json --fail-on
    drift:P%`, on a real history (test_site's: head's count 25% higher from run-5 on):
    the recipe names the step, its size and the run and commit that brought it."""
    if importlib.util.find_spec("dbregress.cli.ledger") is None:
        pytest.skip("dbregress ledger is not in this dbregress")
    from dbregress.cli.main import main
    from dbregress.store.history import reindex
    from tests.unit.test_site import history

    root = tmp_path / "results"
    for i, run in enumerate(history(root, tmp_path, runs=6)):
        run.rename(root / f"run-{i}")  # named by their run ids, as a night's run is
    (root / "history.sqlite").unlink()
    assert reindex(root) == []
    capsys.readouterr()
    argv = ["ledger", "--lab", "nightly", "--reference", "run-0", "--results", str(root)]
    code = main([*argv, "--format", "json", "--fail-on", "drift:1%"])
    out = tmp_path / "ledger.json"
    out.write_text(capsys.readouterr().out)
    judged = nightly.read_drift(out, code, 0.01, "run-5", {"run-5": {"night": "N5"}})
    assert code == 1 and judged["judged"] and judged["unsized"] == ""
    (drift,) = judged["above"]
    assert drift["step"] == "qp100" and drift["ci"][0] > 1.2
    assert nightly.drift_line(drift).startswith("qp100 +25.00% [")
    assert "most from N5 (05cccccccccc, +25.00%)" in nightly.drift_line(drift)


def test_a_bisection_takes_a_list_size_comma_separated() -> None:
    from dbregress.cli.bisect import _sizes

    sizes = _sizes(["steps=l.i0, l.x,qp100", "load_rows=100", "only=point-query"])
    assert sizes == {"steps": ["l.i0", "l.x", "qp100"], "load_rows": 100, "only": ["point-query"]}
