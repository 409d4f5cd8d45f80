"""A registry release's tag in the user's tree: the exact names each project uses, or
one of them with a build number after it (Percona Server's), the highest build first;
with a real small git repository carrying such tags."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dbregress import bisect
from tests.gitrepo import git


def tagged(path: Path, tags: list[str]) -> Path:
    """A repository with one commit per tag, tagged in order."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for n, tag in enumerate(tags):
        (path / "f").write_text(f"{n}\n")
        git(path, "add", "-A")
        git(path, "commit", "-qm", f"commit {n}")
        git(path, "tag", tag)
    return path


def test_release_tags_per_engine() -> None:
    assert bisect.release_tags("postgres", "17.2.0") == ["REL_17_2"]
    assert bisect.release_tags("postgres", "9.6.10") == ["REL9_6_10"]
    assert bisect.release_tags("mariadb", "10.11.5") == ["mariadb-10.11.5"]
    assert bisect.release_tags("mysql", "8.0.28") == [
        "mysql-8.0.28",
        "Percona-Server-8.0.28",
        "fb-mysql-8.0.28",
    ]
    assert bisect.release_tags("rocksdb", "9.10.0") == ["v9.10.0", "rocksdb-9.10.0"]
    assert bisect.release_tags("postgres", "10.11.0-1") == ["REL_10_11"]
    assert bisect.release_tags("sqlite", "3.45.0") == []


def test_a_percona_tree_gives_the_highest_build_of_the_release(tmp_path: Path) -> None:
    tree = tagged(
        tmp_path / "ps",
        [
            "Percona-Server-8.0.27-18",
            "Percona-Server-8.0.28-9",
            "Percona-Server-8.0.28-19",
            "Percona-Server-8.0.28-19-rc1",  # not a build number: never chosen
            "Percona-Server-8.0.280-1",  # another version that begins alike
        ],
    )
    assert bisect.release_commit("mysql", tree, "mysql@8.0.28") == "Percona-Server-8.0.28-19"
    assert bisect.release_commit("mysql", tree, "mysql@8.0.27") == "Percona-Server-8.0.27-18"


def test_the_exact_tag_comes_before_one_with_a_build_number(tmp_path: Path) -> None:
    # Percona's tree carries Oracle's tags too: Oracle's release is the registry's
    tree = tagged(tmp_path / "ps", ["Percona-Server-8.0.28-19", "mysql-8.0.28"])
    assert bisect.release_commit("mysql", tree, "mysql@8.0.28") == "mysql-8.0.28"
    fb = tagged(tmp_path / "fb", ["fb-mysql-8.0.28"])
    assert bisect.release_commit("mysql", fb, "mysql@8.0.28") == "fb-mysql-8.0.28"
    rocks = tagged(tmp_path / "rocks", ["v9.9.3", "v9.10.0"])
    assert bisect.release_commit("rocksdb", rocks, "rocksdb@9.10.0") == "v9.10.0"
    maria = tagged(tmp_path / "maria", ["mariadb-10.11.4", "mariadb-10.11.5"])
    assert bisect.release_commit("mariadb", maria, "mariadb@10.11.5") == "mariadb-10.11.5"


def test_no_tag_names_what_was_tried_and_what_was_near(tmp_path: Path) -> None:
    tree = tagged(tmp_path / "ps", ["Percona-Server-8.0.29-rc1", "mysql-8.0.290"])
    tried = "tried mysql-8.0.29, Percona-Server-8.0.29, fb-mysql-8.0.29"
    with pytest.raises(bisect.BisectError, match=re.escape(tried)) as e:
        bisect.release_commit("mysql", tree, "mysql@8.0.29")
    said = str(e.value)
    assert "with a build number after it" in said
    assert "mysql-8.0.290, Percona-Server-8.0.29-rc1" in said
    assert f"dbregress bisect --src {tree} GOOD BAD" in said
    pg = tagged(tmp_path / "pg", ["REL_16_10"])  # 16.10 is not 16.1
    with pytest.raises(bisect.BisectError, match=re.escape("(tried REL_16_1)")):
        bisect.release_commit("postgres", pg, "postgres@16.1.0")
