"""--all-commits over a history with merges: a range that is not a chain is refused in
one line (neighbours in a date-ordered list of a DAG need not be parent and child); a
chain is bisected as before; and a merge named as the first bad commit of the
first-parent line says it is a merge, which parent brought the change and how to
bisect that branch (a small real git repository; the measuring is simulated)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbregress.bisect import Bisection, BisectPoint, BisectRequest, Verdict, source_builds
from dbregress.cli.bisect import render
from dbregress.model.errors import BuildNotFound
from tests.gitrepo import git
from tests.unit.test_bisect_rule import word

TREE = {"configure": "#!/bin/sh\n", "src/backend/main/main.c": "int main(void) { return 0; }\n"}


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def merged(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """main: A, B, M (merges topic: X1, X2, branched at A), C. X2 brings the change."""
    repo = tmp_path / "pg"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    ids = {"A": commit(repo, TREE, "A")}
    git(repo, "checkout", "-qb", "topic")
    ids["X1"] = commit(repo, {"x": "1"}, "X1")
    ids["X2"] = commit(repo, {"x": "2"}, "X2: more work per query")
    git(repo, "checkout", "-q", "main")
    ids["B"] = commit(repo, {"b": "1"}, "B")
    git(repo, "merge", "-q", "--no-ff", "-m", "M: merge topic", ids["X2"])
    ids["M"] = git(repo, "rev-parse", "HEAD")
    ids["C"] = commit(repo, {"c": "1"}, "C")
    return repo, ids


def test_all_commits_of_a_range_with_merges_is_refused_in_one_line(
    merged: tuple[Path, dict[str, str]],
) -> None:
    repo, ids = merged
    with pytest.raises(BuildNotFound) as e:
        source_builds("postgres", str(repo), ids["A"], "main", "rel", first_parent=False)
    said = str(e.value)
    assert len(said.splitlines()) == 1
    assert "is not a chain (1 merge(s)" in said and "bisecting a DAG is not supported" in said
    # `git rev-list --ancestry-path` by date would have listed A, X1, X2, B, M, C (or
    # another interleaving) as if each were the parent of the next
    first_parent = source_builds("postgres", str(repo), ids["A"], "main", "rel")
    assert [b.split("#")[1].split("+")[0] for b in first_parent] == [
        ids[n] for n in ("A", "B", "M", "C")
    ]


def test_all_commits_of_a_chain_is_the_chain(merged: tuple[Path, dict[str, str]]) -> None:
    repo, ids = merged
    chain = source_builds("postgres", str(repo), ids["A"], ids["X2"], "rel", first_parent=False)
    assert [b.split("#")[1].split("+")[0] for b in chain] == [ids[n] for n in ("A", "X1", "X2")]


def test_a_merge_named_first_bad_says_which_parent_brought_the_change(
    merged: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    repo, ids = merged
    builds = source_builds("postgres", str(repo), ids["A"], "main", "rel")
    level = dict(zip(builds, [100.0, 100.0, 110.0, 110.0], strict=True))  # A B M C

    def measure(b: Bisection, lo: str, mid: str, hi: str, attempt: int) -> BisectPoint:
        def v(x: str, y: str) -> Verdict:
            return Verdict(word(level[x], level[y]), level[y] / level[x], None, "simulated")

        good = b.builds[0]
        vs_good = v(good, mid) if lo != good else None
        return BisectPoint(
            lo, mid, hi, "r", attempt, v(lo, mid), v(hi, mid), v(lo, hi), 0, "", vs_good
        )

    monkeypatch.setattr(Bisection, "_fetch", lambda self, build: None)
    monkeypatch.setattr(Bisection, "_measure", measure)
    monkeypatch.setattr(Bisection, "check_step", lambda self: None)
    request = BisectRequest(builds=builds, benchmark="insert", step="qp100")
    o = Bisection(request, tmp_path / "b", print).run()
    assert o.first_bad == builds[2] and o.last_good == builds[1]
    out = render(o)
    assert f"{ids['M'][:12]} is a merge: its parent {ids['B'][:12]} (the last good" in out
    assert f"through its other parent ({ids['X2'][:12]} 'X2: more work per query')" in out
    assert f"dbregress bisect --src {repo} {ids['A'][:12]} {ids['X2'][:12]}" in out
