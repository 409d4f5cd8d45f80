"""What a bisection answers and how it is asked: the "one of" answer printed with each
candidate commit's id and subject (never "first bad commit" for one of them), the
user's own flavors (--flavors) carried into every point's lab and every build, and the
command line's checks of --try and --flavors."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from dbregress.bisect import BisectRequest, Outcome, lab_text, read_flavor_file
from dbregress.bisect.builds import check_flavor, spec_of
from dbregress.bisect.points import failures_only_of
from dbregress.cli import bisect as cli
from dbregress.cli.main import main
from dbregress.lab.file import parse_lab
from dbregress.model.errors import BuildNotFound, LabError

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "PATH": "/usr/bin:/bin",
}


def history(tree: Path, subjects: list[str]) -> list[str]:
    """A git checkout with one commit per subject; their ids."""
    tree.mkdir()
    (tree / "configure").write_text("#!/bin/sh\n")  # the top of a PostgreSQL tree
    subprocess.run(["git", "init", "-q", "-b", "main", str(tree)], check=True, env=ENV)
    ids = []
    for i, subject in enumerate(subjects):
        (tree / "file.c").write_text(f"/* {i} */\n")
        subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True, env=ENV)
        subprocess.run(["git", "-C", str(tree), "commit", "-qm", subject], check=True, env=ENV)
        done = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "HEAD"], check=True, env=ENV, capture_output=True
        )
        ids.append(done.stdout.decode().strip())
    return ids


def test_candidates_are_listed_with_ids_and_subjects_never_as_one_commit(tmp_path: Path) -> None:
    subjects = ["base", "comment 1", "more work per query", "still broken", "repaired"]
    ids = history(tmp_path / "pg", subjects)
    builds = [f"postgres@src:{tmp_path / 'pg'}#{c}+rel" for c in ids]
    o = Outcome(
        builds=builds,
        direction="slower",
        last_good=builds[1],
        candidates=builds[2:],
        skipped={builds[2]: "make failed", builds[3]: "make failed"},
    )
    text = cli.render(o)
    assert "first bad commit:" not in text and "first bad build:" not in text
    assert "the first bad commit could be any of these 3 (slower than the last good, " in text
    for commit, subject in zip(ids[2:], subjects[2:], strict=True):
        assert f"  {commit[:12]} {subject} (" in text
    assert text.count(f"skipped {ids[2][:12]}+rel: make failed") == 1

    isolated = Outcome(builds=builds, direction="slower", first_bad=builds[2], last_good=builds[1])
    text = cli.render(isolated)
    assert f"first bad commit: {ids[2][:12]} more work per query (" in text
    assert "could be any of" not in text


def flavors_file(tmp_path: Path) -> Path:
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "old.patch").write_text("--- a/x\n+++ b/x\n")
    f = tmp_path / "flavors.toml"
    f.write_text(
        '[flavors.postgres.bigblocks]\ncflags = "-O2"\nconfigure = ["--with-blocksize=32"]\n'
        'patches = [{ file = "patches/old.patch", versions = "<16" }]\n'
    )
    return f


def test_own_flavors_travel_into_every_point_and_every_build(tmp_path: Path) -> None:
    ids = history(tmp_path / "pg", ["a", "b"])
    flavors = read_flavor_file(flavors_file(tmp_path))
    patch = flavors["postgres"]["bigblocks"]["patches"][0]
    assert patch["file"] == str(tmp_path / "patches" / "old.patch")  # absolute
    builds = tuple(f"postgres@src:{tmp_path / 'pg'}#{c}+bigblocks" for c in ids)
    request = BisectRequest(builds=builds, benchmark="insert", step="qp100", flavors=flavors)
    text = lab_text(request, [("b00", builds[0]), ("b01", builds[1])], 2, "p")
    lab = parse_lab(tomllib.loads(text), tmp_path / "labs" / "p.toml", text)
    spec = lab.comparisons[0].columns[0].build
    recipe = json.loads(spec.recipe)
    assert (
        recipe["configure"] == ["--with-blocksize=32"] and recipe["patches"][0]["versions"] == "<16"
    )
    assert spec_of(builds[0], flavors).recipe == spec.recipe  # the ends and mids alike
    assert spec_of(builds[0], {}).recipe == ""
    check_flavor("postgres", "bigblocks", flavors)
    with pytest.raises(BuildNotFound, match="in --flavors: bigblocks"):
        check_flavor("postgres", "nosuch", flavors)


def test_a_flavors_file_with_a_mistake_names_the_file_and_key(tmp_path: Path) -> None:
    f = tmp_path / "flavors.toml"
    f.write_text('[flavors.postgres.mine]\ncflag = "-O3"\n')
    with pytest.raises(LabError, match=r"flavors.toml.*unknown key 'cflag'"):
        read_flavor_file(f)
    f.write_text('[other]\nx = 1\n[flavors.postgres.mine]\ncflags = "-O3"\n')
    with pytest.raises(LabError, match="unknown key 'other'"):
        read_flavor_file(f)


def test_try_and_flavors_are_checked_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bisect", "postgres@15.1.0", "postgres@15.2.0", "--step", "qp100"]
    assert main([*args, "--try", "abcd"]) == 2
    assert (
        "--try retries a build a bisection skipped: give it with --resume"
        in capsys.readouterr().err
    )
    assert main([*args, "--flavors", str(flavors_file(tmp_path))]) == 2
    assert "--flavors FILE is for source builds" in capsys.readouterr().err


def test_a_build_is_skipped_for_a_failed_run_only_when_every_failure_is_its_own(
    tmp_path: Path,
) -> None:
    assert not failures_only_of(tmp_path, "b02-x")  # no run at all
    run = tmp_path / "20261127-1-bisect-1"
    run.mkdir()
    mine = {"where": "b02-x/r1 l.i0", "error": "the server did not start"}
    (run / "run.json").write_text(json.dumps({"failures": [mine]}))
    assert failures_only_of(tmp_path, "b02-x")
    other = {"where": "b00-y/r1 l.i0", "error": "the server did not start"}
    (run / "run.json").write_text(json.dumps({"failures": [mine, other]}))
    assert not failures_only_of(tmp_path, "b02-x")  # the bisection stops: not b02's alone
    (run / "run.json").write_text(json.dumps({"failures": []}))
    assert not failures_only_of(tmp_path, "b02-x")
