"""A tree built as it is on disk (provision/source/worktree.py): in a git work tree the
digest reads what git would commit (tracked files as on disk, untracked files not
ignored, checked-out submodules' own) and names what it left out, so rebuilding in the
tree (a `build/` folder, in-tree objects) neither costs a read of gigabytes nor makes
another build; a copy of the tree is those same files."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbregress.provision import BuildSpec, source
from dbregress.provision.source import tree as src_tree
from dbregress.provision.source import worktree
from tests.gitrepo import git
from tests.unit.test_source_build import make_tree


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DBREGRESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def checkout(path: Path) -> Path:
    """A PostgreSQL stand-in tree committed in git, ignoring build output."""
    make_tree(path)
    (path / ".gitignore").write_text("build/\n*.o\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "tree")
    return path


def test_build_output_git_ignores_is_neither_read_nor_keyed(tmp_path: Path) -> None:
    tree = checkout(tmp_path / "pg")
    first = worktree.digest(tree)
    assert first.left_out == ()
    (tree / "build").mkdir()
    (tree / "build/postgres").write_bytes(b"\0" * 4096)  # a rebuild's output
    (tree / "src/backend/main/main.o").write_bytes(b"\x7fELF")
    again = worktree.digest(tree)
    assert again.digest == first.digest
    assert again.left_out == ("build/", "src/backend/main/main.o")
    assert "left out as git-ignored: build/, src/backend/main/main.o" in again.said()
    # the old digest read them: a rebuild was another build
    assert src_tree.tree_digest(tree) != src_tree.tree_digest(checkout(tmp_path / "clean"))


def test_what_git_would_commit_is_keyed(tmp_path: Path) -> None:
    tree = checkout(tmp_path / "pg")
    seen = {worktree.digest(tree).digest}
    (tree / "VERSION").write_text("15.100\n")  # a modified tracked file
    seen.add(worktree.digest(tree).digest)
    (tree / "new.c").write_text("int x;\n")  # untracked, not ignored
    seen.add(worktree.digest(tree).digest)
    (tree / "configure").chmod(0o644)  # an exec bit
    seen.add(worktree.digest(tree).digest)
    (tree / "src/backend/main/main.c").unlink()  # a tracked file deleted
    seen.add(worktree.digest(tree).digest)
    assert len(seen) == 5


def test_a_checked_out_submodules_files_are_read(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "lib.c").write_text("int lib;\n")
    git(lib, "init", "-q", "-b", "main")
    git(lib, "add", "-A")
    git(lib, "commit", "-qm", "lib")
    tree = checkout(tmp_path / "pg")
    git(tree, "submodule", "add", "-q", str(lib), "lib")
    git(tree, "commit", "-qm", "with lib")
    first = worktree.digest(tree).digest
    (tree / "lib/lib.c").write_text("int lib2;\n")  # dirty inside the submodule
    assert worktree.digest(tree).digest != first


def test_a_tree_that_is_no_checkout_is_digested_whole(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "pg")
    found = worktree.digest(tree)
    assert found.digest == src_tree.tree_digest(tree) and found.left_out == ()


def test_a_copy_holds_the_source_and_not_the_build_output(tmp_path: Path) -> None:
    tree = checkout(tmp_path / "pg")
    (tree / "build").mkdir()
    (tree / "build/big").write_bytes(b"x")
    (tree / "mine.c").write_text("int mine;\n")
    (tree / "link").symlink_to("VERSION")
    copy = tmp_path / "copy"
    worktree.copy(tree, copy)
    assert (copy / "mine.c").read_text() == "int mine;\n"
    assert (copy / "link").is_symlink() and (copy / "configure").stat().st_mode & 0o111
    assert not (copy / "build").exists() and not (copy / ".git").exists()
    assert worktree.digest(copy).digest == worktree.digest(tree).digest


def test_fetch_why_names_what_was_left_out_and_keeps_the_key(tmp_path: Path) -> None:
    tree = checkout(tmp_path / "pg")
    spec = BuildSpec.parse(f"postgres@src:{tree}")
    first = source.why(spec)
    (tree / "build").mkdir()
    (tree / "build/postgres").write_bytes(b"\0")
    again = source.why(spec)
    assert again["key"] == first["key"]
    assert "left out as git-ignored: build/" in again.get("digested", "")
