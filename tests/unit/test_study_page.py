"""A study's page (docs/studies.md): our tables in the seed's layout with the report's
own verdicts (verdicts.json), the ledger, and each claim's agreement, one claim per
agreement class; a run made elsewhere gets its page; a study that cannot run here is
refused with exit 2 and still gets a page; `study run` on the null driver end to end."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest

from dbregress.cli.exits import EXIT_OK, EXIT_UNJUDGED
from dbregress.cli.main import main
from dbregress.lab.file import load_lab
from dbregress.report import ledger
from dbregress.report.ledger_text import to_json
from dbregress.store.replays import save_replay
from dbregress.store.run import RunWriter
from dbregress.study import agreement, record
from dbregress.study.file import load_study
from tests.step_records import native
from tests.unit.test_history import replay
from tests.unit.test_report import step

HOST = {"cpu_model": "Test CPU 9000", "cpu_count": 2, "machine": "x86_64", "kernel": "Linux 6.1"}
STEPS = ("fillseq", "revrange", "readrandom", "fwdrange", "readwhilewriting", "overwriteandwait")
LAB = """\
name = "fixture"
placement = "unpinned"
repeats = 6
warmup_job = false
count = false

[[comparison]]
name = "src"
benchmark = "kv"
[[comparison.column]]
label = "old"
build = "null@{tree}"
[[comparison.column]]
label = "mid"
build = "null@1"
[[comparison.column]]
label = "new"
build = "null@2"
[comparison.kv]
keys = 1000
seconds = 1
short_seconds = 1
steps = ["fillseq", "revrange", "readrandom", "fwdrange", "readwhilewriting", "overwriteandwait"]
"""


def claim(number: int, step_name: str, column: str, figure: str, why: str = "") -> str:
    extra = f'why_may_differ = "{why}"\n' if why else ""
    return (
        f'\n[[claim]]\ncomparison = "src"\nstep = "{step_name}"\nbase = "old"\n'
        f'column = "{column}"\n{figure}\nwhere = "server {number}"\nsaid = "said {number}"\n{extra}'
    )


# One claim per agreement class (and two of no change, listed apart).
STUDY = (
    """\
[study]
name = "fixture"
title = "A fixture study"
seed = "077"
source = "A post about versions (2026-01-02)"
lab = "fixture.lab.toml"
threshold = 0.05
differences = ["a 2-vCPU VM against the seed's 8 cores"]
[study.params]
tree = "a tree of the null engine"
"""
    + claim(1, "fillseq", "new", "seed_ratio = 1.14")  # agrees
    + claim(2, "revrange", "new", 'direction = "faster"', "the seed's cache")  # disagrees
    + claim(3, "readrandom", "new", "seed_ratio = 1.10", "too noisy here")  # direction only
    + claim(4, "readwhilewriting", "new", "seed_ratio = 0.94")  # not measured
    + claim(5, "fwdrange", "new", "seed_ratio = 1.00")  # no change: apart
    + claim(6, "fillseq", "new", 'metric = "instructions"\nseed_ratio = 1.20')  # agrees, cost
    + claim(7, "overwriteandwait", "new", "seed_ratio = 1.14", "a slower flush")  # disagrees
    + claim(8, "fwdrange", "new", 'seed_ratio = 1.03\ndirection = "same"')  # no change: apart
    + claim(9, "revrange", "mid", 'direction = "slower"')  # agrees
)

# new's QPS over old's per step (mid's is half-way); readrandom's repeats spread wide
SHIFT = {"fillseq": 1.30, "revrange": 0.70, "readrandom": 1.05, "fwdrange": 1.0,
         "overwriteandwait": 0.90}  # fmt: skip
WIDE = (0.7, 0.85, 1.0, 1.15, 1.3, 1.45)


def studies(tmp_path: Path, study: str = STUDY, lab: str = LAB, name: str = "fixture") -> Path:
    folder = tmp_path / "studies"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.lab.toml").write_text(lab)
    (folder / f"{name}.toml").write_text(study)
    return folder


def recorded_run(tmp_path: Path, tree: str) -> Path:
    """A run of the fixture's lab with {tree} put in, laid out as the runner lays it out
    (no study.json: made elsewhere), with three counting replays per column."""
    lab_path = tmp_path / "ran" / "lab.toml"
    lab_path.parent.mkdir()
    lab_path.write_text(LAB.replace("{tree}", tree))
    lab = load_lab(lab_path)
    writer = RunWriter(tmp_path / "results", lab, HOST)
    rng = random.Random(3)
    for job in lab.jobs():
        writer.set_job(job, {"status": "ok"})
        label = job.column.label
        for index, name in enumerate(STEPS, start=1):
            if name == "readwhilewriting":
                continue  # not measured
            shift = {"old": 1.0, "mid": (1 + SHIFT[name]) / 2, "new": SHIFT[name]}[label]
            spread = WIDE[job.repeat - 1] if name == "readrandom" else math.exp(rng.gauss(0, 0.005))
            q = 10000.0 * shift * spread
            result = step(label, name, q, "ops", 5.0, repeat=job.repeat)
            writer.write_step(job, index, native(result), [], "")
    writer.finish("ok")
    for label, work in (("old", 1.0), ("mid", 1.1), ("new", 1.2)):
        for n in (1, 2, 3):
            cycles = {
                "fillseq": 10000.0 * work * (1 + rng.gauss(0, 0.0005)),
                "revrange": 20000.0 * (1 + rng.gauss(0, 0.0005)),
            }
            save_replay(writer.path, label, n, {**replay(label, n, cycles), "comparison": "src"})
    return writer.path


def row(page: str, first: str, after: str = "") -> list[str]:
    """The cells of the first table row of `page` whose first cell is `first` (after the
    line holding `after`)."""
    text = page[page.index(after) :] if after else page
    line = next(ln for ln in text.splitlines() if ln.startswith(f"| {first} |"))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.fixture
def made(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, Path, Path]:
    """The fixture's page from its recorded run: (page, run folder, studies folder)."""
    folder = studies(tmp_path)
    tree = str(tmp_path / "trees" / "null-tree")
    run = recorded_run(tmp_path, tree)
    target = tmp_path / "docs" / "fixture.md"
    args = ["study", "page", "fixture", str(run), "--studies", str(folder), "--page", str(target)]
    assert main(args) == EXIT_OK
    assert capsys.readouterr().out.strip() == f"Page: {target}"
    return target.read_text(), run, folder


def test_the_tables_are_the_seeds_layout_with_the_reports_own_verdicts(
    made: tuple[str, Path, Path],
) -> None:
    page, run, _ = made
    verdicts = json.loads((run / "verdicts.json").read_text())  # written for the page
    steps = agreement.index(verdicts)
    head = "### src: time lane, relative QPS (column / old)"
    assert row(page, "step", head) == ["step", "old", "mid", "new"]
    marks = {"slower": "(-)", "faster": "(+)", "same": "=", "undecided": "?"}
    for name in ("fillseq", "revrange", "readrandom", "fwdrange", "overwriteandwait"):
        want = [name, "1 (base)"]
        for label in ("mid", "new"):
            s = steps[("src", label, name)]
            want.append(f"{s['ratio']:.2f} {marks[s['verdict']]}")
        assert row(page, name, head) == want
    assert re.fullmatch(r"1\.[23]\d \(\+\)", row(page, "fillseq", head)[3])
    assert re.fullmatch(r"0\.[67]\d \(-\)", row(page, "revrange", head)[3])
    assert row(page, "readrandom", head)[3].endswith("?")
    assert row(page, "fwdrange", head)[3].endswith("=")
    assert row(page, "readwhilewriting", head) == ["readwhilewriting", "1 (base)", "-", "-"]
    cycles = "### src: cost lane, estimated cycles per operation (column / old)"
    assert row(page, "fillseq", cycles) == ["fillseq", "1 (base)", "1.100 (-)", "1.200 (-)"]
    revrange = row(page, "revrange", cycles)[2:]
    assert [c[-1] for c in revrange] == ["=", "="] and revrange[1] == (
        f"{steps[('src', 'new', 'revrange')]['cost']['ratio']:.3f} ="
    )
    assert row(page, "readrandom", cycles)[2:] == ["-", "-"]  # not counted
    instr = "### src: cost lane, instructions per operation (column / old)"
    assert row(page, "fillseq", instr)[2:] == ["1.100 (-)", "1.200 (-)"]


def test_each_claim_gets_its_agreement_class_and_the_fractions_count_them(
    made: tuple[str, Path, Path],
) -> None:
    page, _, _ = made
    table = "| # | comparison | step | column / base | seed | where | ours | ours, cost lane"
    found = {
        int(cells[0]): cells
        for ln in page[page.index(table) : page.index("### No change claimed")].splitlines()[2:]
        if ln.startswith("| ") and (cells := [c.strip() for c in ln.strip("|").split("|")])
    }
    classes = {n: cells[8] for n, cells in found.items()}
    assert classes == {
        1: "agrees",
        2: "disagrees",
        3: "agrees in direction, undecided",
        4: "not measured",
        6: "agrees",
        7: "disagrees",
        9: "agrees",
    }
    one = found[1]
    assert one[1:6] == ["src", "fillseq", "new / old", "1.14: said 1", "server 1"]
    assert re.fullmatch(r"1\.[23]\d \(\+\) \[1\.\d\d, 1\.\d\d\] faster", one[6]), one[6]
    assert one[7] == "1.200 (-) slower" and one[9] == ""  # agrees: no reason needed
    assert found[2][4] == "faster (no size given): said 2" and found[2][9] == "the seed's cache"
    assert found[3][9] == "too noisy here"
    assert found[4][6] == "-" and found[4][7] == "not counted"
    assert found[6][4] == "1.20 instr/op: said 6"
    assert re.fullmatch(r"instr/op 1\.200 \(-\) \[1\.\d{3}, 1\.\d{3}\] slower", found[6][6])
    assert found[9][3] == "mid / old"
    assert (
        "**The study: 3 of 7 claims agree, decided (43%); 1 of 7 agree in direction only, "
        "undecided (14%); in direction at all 4 of 7 (57%); disagree, decided: 2; disagree "
        "in direction only, undecided: 0; not measured: 1.**"
    ) in page
    apart = page[page.index("### No change claimed") :]
    assert "The seed reports no change of 5% or more for these" in apart
    assert [row(apart, n)[4] for n in ("5", "8")] == ["1.00: said 5", "1.03: said 8"]
    assert row(apart, "5")[6].endswith(" same")


def test_the_page_shows_the_run_and_the_ledger_and_nothing_of_this_machine(
    made: tuple[str, Path, Path], tmp_path: Path
) -> None:
    page, run, _ = made
    assert page.startswith("# A fixture study\n\nStudy `fixture` reproduces seed 077: A post")
    assert f"from run `{run.name}`" in page
    assert "- command: not recorded: the run was not made by `dbregress study run`" in page
    assert "- host: 2 cores, Test CPU 9000, x86_64, Linux 6.1" in page
    assert "| src | kv | 3 | 6 | jobs | keys 1000, " in page  # the run's lab.toml
    assert "- a 2-vCPU VM against the seed's 8 cores" in page
    assert "| old | `null@{tree}` | default | - |" in page
    assert "- `{tree}`: a tree of the null engine" in page
    assert "### src: cost lane, estimated cycles per operation (above 0: more work)" in page
    ledger = "### src: time lane, QPS (above 0: faster)"
    cell = row(page, "fillseq", ledger)[2]
    assert re.fullmatch(r"\+2\d\.\d% faster / \+1\d\.\d% faster", cell), cell
    assert str(tmp_path) not in page and "null-tree" not in page


def test_a_run_without_a_comparison_of_the_study_is_refused(
    made: tuple[str, Path, Path], tmp_path: Path
) -> None:
    _, run, folder = made
    other = studies(tmp_path, STUDY, LAB.replace('name = "src"', 'name = "elsewhere"'))
    text = STUDY.replace('comparison = "src"', 'comparison = "elsewhere"')
    (other / "fixture.toml").write_text(text)
    args = ["study", "page", "fixture", str(run), "--studies", str(folder), "--page", "x.md"]
    assert main(args) == EXIT_UNJUDGED


SHUT = STUDY.replace(
    "threshold = 0.05", 'threshold = 0.05\nrunnable = false\nneeds = "a MySQL tree"'
)


def test_a_study_that_cannot_run_here_exits_2_and_still_gets_its_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = studies(tmp_path, SHUT)
    results = tmp_path / "results"
    args = ["study", "run", "fixture", "--param", "tree=/x", "--out", str(results)]
    assert main([*args, "--studies", str(folder)]) == EXIT_UNJUDGED
    err = capsys.readouterr().err
    assert "Error: study fixture cannot run here: it needs a MySQL tree." in err
    assert "`dbregress study page fixture` writes what it would run" in err
    assert not results.exists()
    target = tmp_path / "shut.md"
    page_args = ["study", "page", "fixture", "--studies", str(folder), "--page", str(target)]
    assert main(page_args) == EXIT_OK
    page = target.read_text()
    assert "This study cannot run here: it needs a MySQL tree. This page says what it" in page
    assert "Command: `dbregress study run fixture --param tree={tree} --scale small`" in page
    assert "| src | kv | 3 | 6 | jobs | keys 1000, " in page
    assert row(page, "1")[1:7] == [
        "src",
        "fillseq",
        "new / old",
        "1.14: said 1",
        "server 1",
        "not run",
    ]
    assert (
        "Steps: fillseq, revrange, readrandom, fwdrange, readwhilewriting, overwriteandwait."
        in page
    )


def test_study_run_asks_for_each_param_with_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = studies(tmp_path)
    assert main(["study", "run", "fixture", "--studies", str(folder)]) == EXIT_UNJUDGED
    err = capsys.readouterr().err
    assert "Error: study fixture needs --param tree=VALUE: a tree of the null engine" in err


NULL_LAB = """\
# a comment the run folder keeps
name = "nullrun"
placement = "unpinned"
repeats = 2
warmup_job = false
count = false

[[comparison]]
name = "src"
benchmark = "kv"
[[comparison.column]]
label = "old"
build = "null@{tree}"
[[comparison.column]]
label = "new"
build = "null@2"
[comparison.kv]
keys = 1000
seconds = 0.2
warmup_s = 0
steps = ["fillseq", "readrandom"]
"""


def test_study_run_on_the_null_driver_records_the_run_and_writes_its_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lab's real runner and loadgen (the null driver: no engine)."""
    monkeypatch.setenv("DBREGRESS_WORKDIR", str(tmp_path / "work"))
    text = STUDY.replace('lab = "fixture.lab.toml"', 'lab = "nullrun.lab.toml"')
    text = text[: text.index("\n[[claim]]")] + claim(1, "readrandom", "new", "seed_ratio = 1.2")
    folder = studies(
        tmp_path, text.replace('name = "fixture"', 'name = "nullrun"'), NULL_LAB, "nullrun"
    )
    tree = str(tmp_path / "my-tree")
    results, target = tmp_path / "results", tmp_path / "pages" / "nullrun.md"
    args = ["study", "run", "nullrun", "--param", f"tree={tree}", "--out", str(results)]
    assert main([*args, "--page", str(target), "--studies", str(folder)]) == EXIT_OK
    assert f"Page: {target}" in capsys.readouterr().err
    (run,) = (p.parent for p in results.glob("*/run.json"))
    lab_text = (run / "lab.toml").read_text()
    assert "# a comment the run folder keeps" in lab_text and f'"null@{tree}"' in lab_text
    record = json.loads((run / "study.json").read_text())
    assert (record["study"], record["scale"], record["params"]) == (
        "nullrun",
        "small",
        {"tree": tree},
    )
    assert record["command"][:4] == ["dbregress", "study", "run", "nullrun"]
    assert record["wall_s"] > 0 and record["host"]["cpu_count"] >= 1
    assert record["sizes"]["src"]["steps"] == ["fillseq", "readrandom"]
    page = target.read_text()
    assert "- command: `dbregress study run nullrun --param tree={tree} --scale small`" in page
    assert re.search(r"- wall time: \d+\.\d s \(both lanes and the report\)", page)
    steps = agreement.index(json.loads((run / "verdicts.json").read_text()))
    marks = {"slower": "(-)", "faster": "(+)", "same": "=", "undecided": "?"}
    s = steps[("src", "new", "readrandom")]
    assert row(page, "readrandom") == [
        "readrandom",
        "1 (base)",
        f"{s['ratio']:.2f} {marks[s['verdict']]}",
    ]
    assert "No cost lane in this run: not run, the lab file sets count = false." in page
    assert tree not in page and str(tmp_path) not in page


def test_classify_and_the_seeds_side_of_one_in_each_lane(tmp_path: Path) -> None:
    study = load_study(studies(tmp_path) / "fixture.toml")
    more_work = next(c for c in study.claims if c.metric == "instructions")
    assert more_work.expected(0.05) == "slower" and more_work.expects_above_one(0.05) is True
    figure = agreement.Figure

    def classify(f: agreement.Figure | None, band: float = 0.01) -> str:
        return agreement.classify(more_work, f, 0.05, band)

    assert classify(figure(1.2, None, "slower")) == "agrees"
    assert classify(figure(1.003, None, "same"), band=0.25) == agreement.DIRECTION
    assert classify(figure(0.9, None, "faster")) == "disagrees"
    assert classify(figure(None, None, "undecided")) == "not measured"
    assert classify(None) == "not measured"
    at_threshold = next(c for c in study.claims if c.step == "readwhilewriting")
    assert at_threshold.seed_ratio == 0.94 and at_threshold.expected(0.06) == "slower"
    assert at_threshold.expected(0.07) is None
    assert agreement.summary([]) == "no claim of a change to judge"


def test_a_params_value_is_found_in_the_runs_builds_and_hidden(
    made: tuple[str, Path, Path], tmp_path: Path
) -> None:
    """The value as the run's build string holds it (resolved), found by its template,
    even without study.json; and the results folder."""
    _, run, folder = made
    study = load_study(folder / "fixture.toml")
    view = record.read_view(run)
    tree = str(tmp_path / "trees" / "null-tree")
    hidden = record.machine_values(study, view)
    assert hidden[tree] == "{tree}" and hidden[str(run.parent.resolve())] == "RESULTS"
    text = f"built null@{tree} into {run}"
    assert record.scrub(text, hidden) == f"built null@{{tree}} into RESULTS/{run.name}"


def test_an_undecided_or_same_verdict_is_no_decided_disagreement_nor_agreement(
    tmp_path: Path,
) -> None:
    """Only a decided verdict agrees or disagrees: an undecided one on the other side of
    1 disagrees in direction only; a `same` (its interval inside the band) disagrees,
    decided, with a seed figure outside the band, and decides nothing within it or
    against a direction with no size."""
    study = load_study(studies(tmp_path) / "fixture.toml")
    by_step = {(c.step, c.column, c.metric): c for c in study.claims}
    figure, classify = agreement.Figure, agreement.classify
    faster_114 = by_step[("fillseq", "new", "qps")]  # seed_ratio 1.14
    faster_no_size = by_step[("revrange", "new", "qps")]  # direction faster
    assert classify(faster_114, figure(0.97, (0.7, 1.3), "undecided"), 0.05, 0.05) == (
        "disagrees in direction, undecided"
    )
    assert classify(faster_114, figure(1.0, (0.7, 1.3), "undecided"), 0.05, 0.05) == (
        "disagrees in direction, undecided"
    )
    assert classify(faster_114, figure(1.06, (0.7, 1.3), "undecided"), 0.05, 0.05) == (
        "agrees in direction, undecided"
    )
    # same within ±5%: the seed's 1.14 lies outside, on either side of 1 ours is
    assert classify(faster_114, figure(1.01, (0.98, 1.04), "same"), 0.05, 0.05) == "disagrees"
    assert classify(faster_114, figure(0.99, (0.96, 1.02), "same"), 0.05, 0.05) == "disagrees"
    # a band of ±20% holds the seed's 1.14: same decides nothing about it
    assert classify(faster_114, figure(1.01, (0.9, 1.1), "same"), 0.05, 0.2) == (
        "agrees in direction, undecided"
    )
    # "faster" with no size: a same cannot say the change is not there
    assert classify(faster_no_size, figure(0.99, (0.97, 1.01), "same"), 0.05, 0.05) == (
        "disagrees in direction, undecided"
    )
    assert classify(faster_no_size, figure(0.8, (0.7, 0.9), "slower"), 0.05, 0.05) == "disagrees"


def test_the_page_counts_a_same_against_a_larger_seed_figure_as_a_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = STUDY[: STUDY.index("\n[[claim]]")]
    text += claim(1, "fwdrange", "new", "seed_ratio = 1.14")  # ours: same
    text += claim(2, "readrandom", "new", "seed_ratio = 0.90")  # ours: 1.05, undecided
    folder = studies(tmp_path, text)
    run = recorded_run(tmp_path, str(tmp_path / "tree"))
    target = tmp_path / "page.md"
    args = ["study", "page", "fixture", str(run), "--studies", str(folder), "--page", str(target)]
    assert main(args) == EXIT_OK
    page = target.read_text()
    head = "| # | comparison | step | column / base | seed | where | ours | ours, cost lane"
    assert row(page, "1", head)[6].endswith(" same") and row(page, "1", head)[8] == "disagrees"
    assert row(page, "2", head)[6].endswith(" undecided")
    assert row(page, "2", head)[8] == "disagrees in direction, undecided"
    assert (
        "**The study: 0 of 2 claims agree, decided (0%); 0 of 2 agree in direction only, "
        "undecided (0%); in direction at all 0 of 2 (0%); disagree, decided: 1; disagree in "
        "direction only, undecided: 1; not measured: 0.**"
    ) in page


TWO = """\
name = "fixture"
placement = "unpinned"
repeats = 5
warmup_job = false
count = false

[[comparison]]
name = "src"
benchmark = "kv"
[[comparison.column]]
label = "old"
build = "null@{tree}"
[[comparison.column]]
label = "new"
build = "null@2"
[comparison.kv]
keys = 1000
steps = ["fillseq", "readrandom"]

[[comparison]]
name = "other"
benchmark = "kv"
[[comparison.column]]
label = "x"
build = "null@1"
[[comparison.column]]
label = "y"
build = "null@1"
[comparison.kv]
keys = 1000
steps = ["fillseq", "revrange", "readrandom", "fwdrange", "readwhilewriting", "overwriteandwait"]
"""


def lab_run(tmp_path: Path, text: str, status: str = "ok") -> Path:
    """A run of a lab (no study.json), ending with `status`: new is 1.3 times old's QPS
    on fillseq, every other cell the same five values (1000 to 1040)."""
    lab_path = tmp_path / "ran" / "lab.toml"
    lab_path.parent.mkdir(parents=True)
    lab_path.write_text(text)
    lab = load_lab(lab_path)
    writer = RunWriter(tmp_path / "results", lab, HOST)
    for job in lab.jobs():
        writer.set_job(job, {"status": "ok"})
        label, sizes = job.column.label, job.comparison.sizes
        for index, name in enumerate(getattr(sizes, "steps", ()), start=1):
            q = (
                1000.0
                * (1 + 0.01 * job.repeat)
                * (1.3 if (label, name) == ("new", "fillseq") else 1)
            )
            result = step(label, name, q, "ops", 5.0, repeat=job.repeat)
            writer.write_step(job, index, native(result), [], "")
    writer.finish(status)
    return writer.path


def test_the_ledgers_cumulative_change_is_the_reports_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ledger judges a comparison's columns against its base within that comparison
    alone; the report, across the lab (one Benjamini-Hochberg family): the page's ledger
    shows the report's cumulative change, as its tables above do."""
    text = STUDY[: STUDY.index("\n[[claim]]")] + claim(1, "fillseq", "new", "seed_ratio = 1.14")
    folder = studies(tmp_path, text, TWO)
    run = lab_run(tmp_path, TWO.replace("{tree}", str(tmp_path / "tree")))
    target = tmp_path / "page.md"
    args = ["study", "page", "fixture", str(run), "--studies", str(folder), "--page", str(target)]
    assert main(args) == EXIT_OK
    page = target.read_text()
    reported = agreement.index(json.loads((run / "verdicts.json").read_text()))
    fillseq = reported[("src", "new", "fillseq")]
    assert fillseq["verdict"] == "undecided"  # 5 vs 5 repeats among 8 keys of the lab
    own = to_json(ledger.run_ledger(run, lanes=("time",)))["steps"]
    cell = next(r for r in own if (r["comparison"], r["step"]) == ("src", "fillseq"))
    assert cell["points"][1]["cumulative"]["class"] == "undecided"  # the report's, lab-wide
    assert row(page, "fillseq", "### src: time lane, relative QPS")[2] == "1.30 ?"
    ledger_cell = row(page, "fillseq", "### src: time lane, QPS (above 0: faster)")[1]
    assert ledger_cell.startswith("+30.0% undecided / "), ledger_cell
    assert row(page, "1", "| # | comparison")[8] == "agrees in direction, undecided"


def test_a_run_that_did_not_finish_says_so_above_its_tables_and_its_fractions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = STUDY[: STUDY.index("\n[[claim]]")] + claim(1, "fillseq", "new", "seed_ratio = 1.14")
    lab = TWO[: TWO.index('\n[[comparison]]\nname = "other"')]
    folder = studies(tmp_path, text, lab)
    target = tmp_path / "page.md"

    def page_of(run: Path) -> str:
        args = ["study", "page", "fixture", str(run), "--studies", str(folder)]
        assert main([*args, "--page", str(target)]) == EXIT_OK
        return target.read_text()

    done = page_of(lab_run(tmp_path / "done", lab.replace("{tree}", "/t")))
    assert "did not finish" not in done
    failed = page_of(lab_run(tmp_path / "failed", lab.replace("{tree}", "/t"), "failed"))
    said = "**This run did not finish: its time lane ended failed. Its tables hold what it"
    assert said in failed and failed.index(said) < failed.index("## The run")
    assert "**The run did not finish (its time lane ended failed): what follows" in failed
    # a cost lane planned but never ended: no cost/lane.json
    counted = lab_run(tmp_path / "counted", lab.replace("{tree}", "/t"))
    data = json.loads((counted / "run.json").read_text())
    data["cost_lane"] = {"planned": True, "why_not": None}
    (counted / "run.json").write_text(json.dumps(data))
    assert "its cost lane did not record its end (cost/lane.json)" in page_of(counted)


def test_the_columns_are_shown_as_the_run_built_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of another lab with the study's labels (here new built at another commit,
    from a path of its own) shows its own builds, with no path of its machine."""
    text = STUDY[: STUDY.index("\n[[claim]]")] + claim(1, "fillseq", "new", "seed_ratio = 1.14")
    lab = TWO[: TWO.index('\n[[comparison]]\nname = "other"')]
    folder = studies(tmp_path, text, lab)
    tree = str(tmp_path / "tree")
    other = lab.replace("{tree}", tree).replace('"null@2"', f'"null@{tmp_path}/elsewhere"')
    run = lab_run(tmp_path, other)
    target = tmp_path / "page.md"
    args = ["study", "page", "fixture", str(run), "--studies", str(folder), "--page", str(target)]
    assert main(args) == EXIT_OK
    page = target.read_text()
    assert "| old | `null@{tree}` | default | - |" in page
    assert "| new | `null@{path}` | default | - |" in page
    assert str(tmp_path) not in page


def test_a_run_of_another_base_measures_no_claim_and_says_what_it_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose comparison has another first column judged new against it, not
    against the claim's base: the claim is not measured, and the page says why, and
    which of the study's steps and columns the run has not."""
    text = STUDY[: STUDY.index("\n[[claim]]")] + claim(1, "fillseq", "new", "seed_ratio = 1.14")
    folder = studies(tmp_path, text)  # src: old (base), mid, new; six steps
    ran = TWO[: TWO.index('\n[[comparison]]\nname = "other"')]
    old = '[[comparison.column]]\nlabel = "old"\nbuild = "null@1"\n'
    ran = ran.replace('label = "old"', 'label = "mid"', 1)
    ran = ran.replace(
        '[[comparison.column]]\nlabel = "new"', old + '[[comparison.column]]\nlabel = "new"'
    )
    run = lab_run(tmp_path, ran.replace("{tree}", "/t"))
    target = tmp_path / "page.md"
    args = ["study", "page", "fixture", str(run), "--studies", str(folder), "--page", str(target)]
    assert main(args) == EXIT_OK
    page = target.read_text()
    assert (
        f"Run `{run.name}` is not the study's lab here: its base is mid, not the study's old: "
        "the figures below are against mid, and no claim of src is measured; it reports no "
        "step revrange, fwdrange, readwhilewriting, overwriteandwait."
    ) in page
    assert row(page, "fillseq", "### src: time lane")[3] == "1.30 (+)"  # new / mid
    assert row(page, "1", "| # | comparison")[6:9] == ["-", "not counted", "not measured"]


def test_a_run_of_another_study_is_not_given_this_studys_command(
    made: tuple[str, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, run, folder = made
    other = (folder / "fixture.toml").read_text().replace('name = "fixture"', 'name = "other"')
    (folder / "other.toml").write_text(other)
    lab = load_lab(run / "lab.toml")
    record.start(run, load_study(folder / "other.toml"), lab, ["dbregress"], {"tree": "/t"}, "full")
    target = tmp_path / "again.md"
    args = ["study", "page", "fixture", str(run), "--studies", str(folder), "--page", str(target)]
    assert main(args) == EXIT_OK
    page = target.read_text()
    assert "- command: `dbregress study run other` (another study), --scale full" in page
    assert "dbregress study run fixture" not in page


def test_the_lanes_line_says_how_many_repeats_the_busy_host_left_out() -> None:
    """A time lane whose repeats were all disturbed has no figure at all: its tables'
    dashes are explained, not left to read as steps that never ran."""
    from dbregress.study.page import _lanes

    lanes = {"judged": ["cost"], "not_judged": {"time": "every step is undecided (40)"}}
    disturbed = [{"column": "a", "repeat": 1, "step": "qp100", "why": "other CPU 35%"}] * 3
    line = _lanes({"lanes": lanes, "disturbed": disturbed})  # type: ignore[typeddict-item]
    assert "3 repeat(s) of steps left out of the time lane as disturbed" in line
    assert "disturbed" not in _lanes({"lanes": lanes})  # type: ignore[typeddict-item]
