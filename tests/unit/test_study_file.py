"""Study files (docs/studies.md): loaded and checked against their lab, each mistake
named with the file, the line and the key; the params put into the build strings only;
a scale merged over the benchmark sections; `dbregress study list`."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from dbregress.cli.exits import EXIT_OK, EXIT_UNJUDGED
from dbregress.cli.main import main
from dbregress.lab.file import KvSizes, MicroSizes
from dbregress.model.errors import DbregressError, LabError
from dbregress.study import render
from dbregress.study.file import find_study, load_study

ROOT = Path(__file__).parents[2]

LAB = """\
# the tree comes from the study's param
name = "tiny"
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
seconds = 1
steps = ["fillseq", "readrandom", "readwhilewriting"]

[[comparison]]
name = "other"
benchmark = "kv"
[[comparison.column]]
label = "x"
build = "null@1"
[[comparison.column]]
label = "y"
build = "null@2"
[comparison.kv]
keys = 1000
steps = ["fillseq", "readrandom"]
"""

STUDY = """\
[study]
name = "tiny"
title = "A tiny study"
seed = "042"
source = "A post (2026-01-01)"
lab = "tiny.lab.toml"
threshold = 0.05
differences = ["all of it"]
[study.params]
tree = "a null tree, any text"
[scale.full]
kv = { keys = 5000, seconds = 3 }
other = { keys = 7000 }

[[claim]]
comparison = "src"
step = "fillseq"
base = "old"
column = "new"
metric = "qps"
seed_ratio = 1.14
where = "a server"
said = "fillseq ~14% faster"
"""


def write(folder: Path, study: str = STUDY, lab: str = LAB, name: str = "tiny") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.lab.toml").write_text(lab)
    path = folder / f"{name}.toml"
    path.write_text(study)
    return path


def refused(tmp_path: Path, study: str = STUDY, lab: str = LAB) -> str:
    with pytest.raises(LabError) as e:
        load_study(write(tmp_path, study, lab))
    return str(e.value)


def test_a_study_loads_with_its_lab_claims_params_and_scales(tmp_path: Path) -> None:
    study = load_study(write(tmp_path))
    assert (study.name, study.seed, study.threshold, study.runnable) == ("tiny", "042", 0.05, True)
    assert study.params == {"tree": "a null tree, any text"}
    assert study.page == Path("docs/studies/tiny.md")  # the default
    assert [c.name for c in study.lab.comparisons] == ["src", "other"]
    (claim,) = study.claims
    assert (claim.step, claim.column, claim.seed_ratio, claim.expected(0.05)) == (
        "fillseq",
        "new",
        1.14,
        "faster",
    )
    assert find_study("tiny", tmp_path) == tmp_path / "tiny.toml"
    with pytest.raises(LabError, match=r"no study 'nope' in .*\(its studies: tiny\)"):
        find_study("nope", tmp_path)


@pytest.mark.parametrize(
    ("change", "where", "said"),
    [
        (
            ('title = "A tiny study"', 'title = "A tiny study"\ncolour = "red"'),
            ":4: study.colour",
            "unknown key 'colour'",
        ),
        (('name = "tiny"', 'name = "small"'), ":2: study.name", "must be the file's stem 'tiny'"),
        (('lab = "tiny.lab.toml"', 'lab = "gone.lab.toml"'), ":6: study.lab", "no lab file"),
        (
            ('comparison = "src"', 'comparison = "nosuch"'),
            ":16: claim[0].comparison",
            "no comparison 'nosuch' in the lab (src, other)",
        ),
        (
            ('step = "fillseq"', 'step = "overwritesome"'),
            ":17: claim[0].step",
            "not a reported step of src (fillseq, readrandom, readwhilewriting)",
        ),
        (
            ('column = "new"', 'column = "newer"'),
            ":19: claim[0].column",
            "no column 'newer' in src (old, new)",
        ),
        (
            ('base = "old"', 'base = "new"'),
            ":18: claim[0].base",
            "new is not the base of src (old)",
        ),
        (
            ('metric = "qps"', 'metric = "joules"'),
            ":20: claim[0].metric",
            "unknown metric 'joules'",
        ),
        (
            ("seed_ratio = 1.14", 'seed_ratio = 1.14\ndirection = "slower"'),
            "claim[0].direction",
            "'slower', but seed_ratio 1.14 says faster",
        ),
        (
            ("seed_ratio = 1.14", 'seed_ratio = 1.0\ndirection = "faster"'),
            "claim[0].direction",
            "'faster', but seed_ratio 1 says no change",
        ),
        (
            (
                'metric = "qps"\nseed_ratio = 1.14',
                'metric = "instructions"\nseed_ratio = 1.14\ndirection = "faster"',
            ),
            "claim[0].direction",
            "'faster', but seed_ratio 1.14 says slower",
        ),
        (
            ("seed_ratio = 1.14", 'direction = "sideways"'),
            "claim[0].direction",
            "must be one of faster, slower, same",
        ),
        (("seed_ratio = 1.14\n", ""), "claim[0]", "give seed_ratio"),
        (
            ("other = { keys = 7000 }", "nosuch = { keys = 7000 }"),
            ":13: scale.full.nosuch",
            "nor a comparison of tiny.lab.toml (these are: kv, src, other)",
        ),
        (
            ("other = { keys = 7000 }", "other = { keyz = 7000 }"),
            "scale.full",
            "unknown key 'keyz'",
        ),
        (
            ("[study.params]", '[study.params]\n"2x" = "no"'),
            "study.params.2x",
            "a param's name is letters",
        ),
    ],
)
def test_each_mistake_names_the_file_the_line_and_the_key(
    tmp_path: Path, change: tuple[str, str], where: str, said: str
) -> None:
    assert change[0] in STUDY
    text = refused(tmp_path, STUDY.replace(change[0], change[1], 1))
    assert text.startswith(str(tmp_path / "tiny.toml"))
    assert where in text and said in text, text


def test_placeholders_stand_in_build_strings_only_and_name_a_param(tmp_path: Path) -> None:
    text = refused(tmp_path, lab=LAB.replace('build = "null@2"', 'build = "null@{version}"', 1))
    assert text.startswith(f"{tmp_path / 'tiny.lab.toml'}:16: comparison[0].column[1].build")
    assert "{version} names no param of the study (its params: tree)" in text
    lab = LAB.replace('name = "tiny"', 'name = "tiny-{tree}"')
    text = refused(tmp_path, lab=lab)
    assert ":2: name: a {param} placeholder is allowed in build strings only" in text
    # braces that name no param are no placeholder: a lab's own text is left alone
    ok = LAB.replace('placement = "unpinned"', 'placement = { server = "0", client = "0" }')
    assert load_study(write(tmp_path, lab=ok)).lab.placement.server_cpus == frozenset({0})


def test_params_go_into_the_build_strings_and_the_text_keeps_its_comments(tmp_path: Path) -> None:
    study = load_study(write(tmp_path))
    r = study.rendered({"tree": "/some/tree"})
    assert "# the tree comes from the study's param" in r.text
    assert 'build = "null@/some/tree"' in r.text and "{tree}" not in r.text
    assert str(r.lab.comparisons[0].columns[0].build) == "null@/some/tree"
    assert r.lab.comparisons[0].sizes == KvSizes(
        keys=1000, seconds=1, steps=("fillseq", "readrandom", "readwhilewriting")
    )
    # a value TOML must escape still reads back as given
    odd = 'C:\\tree "quoted"'
    r = study.rendered({"tree": odd})
    assert tomllib.loads(r.text)["comparison"][0]["column"][0]["build"] == f"null@{odd}"


def test_a_missing_or_unknown_param_is_named_with_what_it_is() -> None:
    params = {"tree": "a RocksDB checkout", "other": "a second tree"}
    with pytest.raises(DbregressError) as e:
        render.param_values("s", params, {"tree": "/x"})
    assert str(e.value) == "study s needs --param other=VALUE: a second tree"
    with pytest.raises(DbregressError, match=r"--param nope: study s has no such param"):
        render.param_values("s", params, {"tree": "/x", "other": "/y", "nope": "1"})
    assert render.param_values("s", params, {"other": "/y", "tree": "/x"}) == {
        "tree": "/x",
        "other": "/y",
    }


def test_a_scale_merges_over_every_section_of_its_benchmark_then_a_comparisons_own(
    tmp_path: Path,
) -> None:
    study = load_study(write(tmp_path))
    r = study.rendered({"tree": "/t"}, "full")
    src, other = (c.sizes for c in r.lab.comparisons)
    assert isinstance(src, KvSizes) and isinstance(other, KvSizes)
    assert (src.keys, src.seconds, src.steps) == (
        5000,
        3.0,
        ("fillseq", "readrandom", "readwhilewriting"),
    )
    assert (other.keys, other.seconds) == (7000, 3.0)
    assert r.text.startswith("# tiny.lab.toml as `dbregress study run tiny --scale full` ran it")
    assert 'build = "null@/t"' in r.text
    with pytest.raises(LabError, match=r"has no \[scale.huge\] \(its scales: small, full\)"):
        study.rendered({"tree": "/t"}, "huge")


def test_toml_text_writes_nested_tables_and_arrays_of_tables_back_as_they_were() -> None:
    data = {
        "name": "x",
        "count_steps": [],
        "verdict": {"alpha": 0.05},
        "flavors": {
            "mysql": {"o3": {"cc": "clang", "patches": [{"file": "a.patch"}, {"file": "b"}]}}
        },
        "comparison": [
            {
                "name": "a",
                "column": [
                    {"label": "p", "build": "null@1", "settings": {"cache_mb": 8, "x.y": "z"}}
                ],
                "kv": {"keys": 10, "steps": ["fillseq"], "warmup_s": 0.5},
            }
        ],
    }
    text = render.toml_text(data, "a head")
    assert text.startswith("# a head\n") and tomllib.loads(text) == data


def test_study_list_names_each_study_and_an_invalid_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "studies"
    write(folder)
    shut = STUDY.replace('name = "tiny"', 'name = "shut"').replace(
        "threshold", 'runnable = false\nneeds = "a MySQL tree"\nthreshold'
    )
    write(folder, shut.replace('lab = "tiny.lab.toml"', 'lab = "shut.lab.toml"'), name="shut")
    assert main(["study", "list", "--studies", str(folder)]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["NAME", "SEED", "RUNNABLE", "TITLE"]
    assert out[1].split()[:3] == ["shut", "042", "no"] and out[2].strip() == "params: tree"
    assert out[3].strip() == "needs: a MySQL tree"
    assert out[4].split()[:3] == ["tiny", "042", "yes"] and out[4].endswith("A tiny study")
    bad_study = STUDY.replace('name = "tiny"', 'name = "bad"')
    write(folder, bad_study.replace("seed_ratio = 1.14", "seed_ratio = -1"), name="bad")
    assert main(["study", "list", "--studies", str(folder)]) == EXIT_UNJUDGED
    bad = capsys.readouterr().out
    assert "bad" in bad and "invalid" in bad and "claim[0].seed_ratio" in bad


def test_the_seed003_study_loads_and_renders_at_both_scales() -> None:
    study = load_study(ROOT / "labs" / "studies" / "seed003-rocksdb-over-time.toml")
    assert study.params == {"rocksdb_tree": study.params["rocksdb_tree"]}
    source, jars = study.lab.comparisons
    assert [c.label for c in source.columns] == [
        "6.29-src", "7.10-src", "8.11-src", "9.11-src", "10.2-src", "10.8-src"
    ]  # fmt: skip
    assert [c.label for c in jars.columns][-1] == "10.2-jar"
    assert study.lab.schedule == "interleaved" and study.lab.count is True
    assert len(study.claims) == 20
    apart = [c for c in study.claims if c.expected(study.threshold) is None]
    assert [(c.comparison, c.step) for c in apart] == [
        ("source", "readwhilewriting"),
        ("jars", "readwhilewriting"),
    ]
    full = study.rendered({"rocksdb_tree": "/src/rocksdb"}, "full").lab
    assert isinstance(full.comparisons[0].sizes, KvSizes)
    assert (full.comparisons[0].sizes.keys, full.comparisons[0].sizes.seconds) == (20_000_000, 1800)
    assert str(full.comparisons[0].columns[-1].build).endswith("/src/rocksdb#v10.8.3+rel_clang_lto")


AMBIGUOUS = """\
name = "amb"
placement = "unpinned"
repeats = 2
warmup_job = false
count = false

[[comparison]]
name = "kv"
benchmark = "micro"
[[comparison.column]]
label = "a"
build = "null@1"
[[comparison.column]]
label = "b"
build = "null@2"

[[comparison]]
name = "store"
benchmark = "kv"
[[comparison.column]]
label = "x"
build = "null@{tree}"
[[comparison.column]]
label = "y"
build = "null@2"
[comparison.kv]
keys = 1000
"""


def test_a_scale_key_naming_both_a_benchmark_and_another_comparison_is_refused(
    tmp_path: Path,
) -> None:
    """[scale.full] kv: the kv section of `store`, or the comparison named kv (a micro
    one)? Merged into both, kv's sizes would land in the micro section too."""
    study = STUDY[: STUDY.index("[scale.full]")] + "[scale.full]\nkv = { seconds = 3 }\n"
    text = refused(tmp_path, study, AMBIGUOUS)
    assert ":12: scale.full.kv: 'kv' names both a benchmark section (of store) and a " in text
    # a comparison named as its own benchmark, the only one of it, is one section either way
    alone = AMBIGUOUS.replace('name = "kv"', 'name = "m"').replace('name = "store"', 'name = "kv"')
    micro, kv = (
        load_study(write(tmp_path, study, alone)).rendered({"tree": "/t"}, "full").lab.comparisons
    )
    assert isinstance(micro.sizes, MicroSizes) and isinstance(kv.sizes, KvSizes)
    assert (micro.sizes.seconds, kv.sizes.seconds) == (MicroSizes().seconds, 3.0)


def test_the_seed_files_give_no_figure_the_seed_does_not_publish() -> None:
    """Seed 003's May 2025 post gives readww no figure ("similar"): a direction, not a
    ratio of 1.00 shown as published. Seed 001 says up to 12% without naming the build
    it is against."""
    seed003 = load_study(ROOT / "labs" / "studies" / "seed003-rocksdb-over-time.toml")
    readww = [
        c for c in seed003.claims if c.where.startswith("May") and c.step == "readwhilewriting"
    ]
    assert [(c.seed_ratio, c.direction) for c in readww] == [(None, "same"), (None, "same")]
    seed001 = load_study(ROOT / "labs" / "studies" / "seed001-compile-flavors.toml")
    assert all(
        "than rel " not in c.said and "2023" not in (c.why_may_differ or "") for c in seed001.claims
    )
