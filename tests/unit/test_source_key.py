"""A source build's cache key covers every input that changes what gets built: two
requests that differ only in the C++ compiler, or only in an environment variable the
build reads, or only in link flags, are different builds; a variable no build reads,
or asking twice, is the same build. `fetch --why` prints the inputs without building."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dbregress.provision import BuildSpec, source
from tests.unit.test_source_build import make_cmake_tree, make_tree


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DBREGRESS_CACHE", str(tmp_path / "cache"))
    for name in ("CC", "CXX", "PKG_CONFIG_PATH", "CFLAGS", "WITH_BOOST"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache"


def wrapper(bin_dir: Path, name: str, real: str) -> Path:
    """Another compiler: a script that runs `real` (another file, so another identity)."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def inputs(spec: str) -> dict[str, Any]:
    out = source.why(BuildSpec.parse(spec))
    assert out["cached"] is False
    return dict(out)


def test_another_cxx_is_another_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    line = "mysqld  Ver 10.11.99-MariaDB for debian-linux-gnu on x86_64 (Source distribution)"
    tree = make_cmake_tree(tmp_path / "mariadb", bin_dir, line)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    spec = f"mariadb@src:{tree}+rel"
    first = inputs(spec)
    assert inputs(spec)["key"] == first["key"]  # asking twice: the same build
    monkeypatch.setenv("CXX", str(wrapper(bin_dir, "my-g++", "g++")))
    other = inputs(spec)
    assert other["key"] != first["key"]
    cxx = other["inputs"]["compilers"]["cxx"]
    assert cxx["path"].endswith("my-g++") and cxx["sha256"]
    assert other["inputs"]["compilers"]["cc"] == first["inputs"]["compilers"]["cc"]
    assert other["inputs"]["environment"]["CXX"].endswith("my-g++")
    # the tools the build runs are named with their versions
    assert other["inputs"]["tools"]["cmake"] == "cmake version 3.99 (stand-in)"


def test_an_environment_variable_the_build_reads_is_part_of_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = make_tree(tmp_path / "pg")
    spec = f"postgres@src:{tree}+rel"
    first = inputs(spec)
    monkeypatch.setenv("DBREGRESS_UNRELATED", "x")  # read by no build: the same key
    assert inputs(spec)["key"] == first["key"]
    monkeypatch.setenv("PKG_CONFIG_PATH", str(tmp_path / "pc"))
    other = inputs(spec)
    assert other["key"] != first["key"]
    assert other["inputs"]["environment"] == {"PKG_CONFIG_PATH": str(tmp_path / "pc")}
    # one prefix for every build, programs finding libpq beside them (build.PG_PREFIX)
    assert other["inputs"]["fixed_options"] == [
        "--without-icu",
        "--disable-nls",
        "--prefix=/opt/dbregress-postgres",
        "make rpathdir=$$ORIGIN/../lib",
    ]


def test_native_flavors_name_the_cpu_and_portable_ones_do_not(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "pg")
    native = inputs(f"postgres@src:{tree}+rel_native_lto")["inputs"]
    cpu = native["cpu"]
    assert cpu["model"] and len(cpu.get("native_sha256") or cpu["flags_sha256"]) == 64
    assert "cpu" not in inputs(f"postgres@src:{tree}+rel")["inputs"]


def test_a_commit_names_its_id_and_a_tree_on_disk_its_digest(tmp_path: Path) -> None:
    from tests.unit.test_source_build import git

    tree = make_tree(tmp_path / "pg")
    on_disk = inputs(f"postgres@src:{tree}")["inputs"]["tree"]
    assert set(on_disk) == {"digest"}
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "one")
    at = inputs(f"postgres@src:{tree}#HEAD")["inputs"]["tree"]
    assert at == {"commit": git(tree, "rev-parse", "HEAD"), "submodules": {}}
    (tree / "link").symlink_to("VERSION")  # a symlink is part of the tree
    assert inputs(f"postgres@src:{tree}")["inputs"]["tree"] != on_disk


def test_fetch_why_prints_the_inputs_and_builds_nothing(tmp_path: Path, cache: Path) -> None:
    tree = make_tree(tmp_path / "pg")
    done = subprocess.run(
        [sys.executable, "-m", "dbregress.cli.main", "fetch", "--why", f"postgres@src:{tree}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout).values()
    assert entry["cached"] is False and entry["key"].startswith("src-tree-")
    assert entry["inputs"]["recipe"]["cflags"].startswith("-O2")
    assert not (cache / "postgres").exists() or not any((cache / "postgres").glob("src-*"))
    bad = subprocess.run(
        [sys.executable, "-m", "dbregress.cli.main", "fetch", "--why", "postgres@17.2.0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "--why is for source builds" in bad.stderr


def test_link_flags_alone_make_another_build(tmp_path: Path) -> None:
    """Two lab flavors that differ only in ldflags (the names kept apart by the recipe,
    not by the flavor's name: the same name in two labs)."""
    tree = make_tree(tmp_path / "pg")
    spec = f"postgres@src:{tree}+mine"
    plain = source.normalized("postgres", {"cflags": "-O2 -g1"})
    linked = source.normalized("postgres", {"cflags": "-O2 -g1", "ldflags": "-Wl,-z,now"})
    keys = [
        source.why(BuildSpec(s.engine, s.version, json.dumps(r, sort_keys=True)))["key"]
        for s, r in ((BuildSpec.parse(spec), plain), (BuildSpec.parse(spec), linked))
    ]
    assert keys[0] != keys[1]


def test_two_subdirectories_of_one_commit_are_two_builds(tmp_path: Path) -> None:
    from tests.unit.test_source_build import git

    repo = tmp_path / "repo"
    make_tree(repo / "pg15", "15.99")
    make_tree(repo / "pg16", "16.99")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two trees")
    a = inputs(f"postgres@src:{repo}/pg15#HEAD")
    b = inputs(f"postgres@src:{repo}/pg16#HEAD")
    assert a["key"] != b["key"]
    assert a["inputs"]["tree"]["subdir"] == "pg15/"


def test_the_build_sees_only_the_environment_its_key_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COPT (which PostgreSQL's make adds to CFLAGS) and CMAKE_TOOLCHAIN_FILE are read
    by builds but are not in the key: they never reach a build step."""
    from dbregress.provision.source.build import build_environment

    monkeypatch.setenv("COPT", "-O0")
    monkeypatch.setenv("CMAKE_TOOLCHAIN_FILE", "/x.cmake")
    monkeypatch.setenv("PKG_CONFIG_PATH", "/pc")
    monkeypatch.setenv("MAKEFLAGS", "-j9")
    env = build_environment(tmp_path / "work", None)
    assert "COPT" not in env and "CMAKE_TOOLCHAIN_FILE" not in env and "MAKEFLAGS" not in env
    assert env["PKG_CONFIG_PATH"] == "/pc" and "PATH" in env
    assert env["GIT_CONFIG_KEY_0"] == "cmake.update-submodules"


def test_native_is_found_anywhere_in_the_recipe_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dbregress.provision.source.key import native

    portable = {"cflags": "-O2 -DNDEBUG"}
    assert native(source.normalized("rocksdb", {**portable, "cmake": ["-DPORTABLE:BOOL=OFF"]}))
    mine = {**portable, "cmake": ["-DCMAKE_CXX_FLAGS=-march=native"]}
    assert native(source.normalized("mysql", mine))
    assert not native(source.normalized("rocksdb", {**portable, "cmake": ["-DPORTABLE=1"]}))
    assert native(source.recipe("rocksdb", "rel"))  # the default: native
    assert not native(source.recipe("rocksdb", "rel_portable"))
    monkeypatch.setenv("CFLAGS", "-O2 -march=native")
    assert native(source.normalized("postgres", {}))


def test_a_checkout_with_a_submodule_not_checked_out_is_refused_before_building(
    tmp_path: Path,
) -> None:
    from dbregress.model.errors import BuildNotFound
    from tests.unit.test_source_build import git

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.c").write_text("int a;\n")
    git(lib, "init", "-q")
    git(lib, "add", "-A")
    git(lib, "commit", "-qm", "lib")
    top = make_tree(tmp_path / "pg")
    git(top, "init", "-q")
    git(top, "add", "-A")
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(top, "commit", "-qam", "with lib")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(top), str(clone))
    with pytest.raises(BuildNotFound, match="submodule\\(s\\) lib not checked out"):
        source.why(BuildSpec.parse(f"postgres@src:{clone}"))


def test_a_patch_is_keyed_by_its_content_not_its_path(tmp_path: Path) -> None:
    """The same patch in a lab folder moved elsewhere: the same build; another
    content: another build."""
    tree = make_tree(tmp_path / "pg")
    spec = BuildSpec.parse(f"postgres@src:{tree}+mine")

    def key_with(folder: Path, text: str) -> str:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "fix.patch").write_text(text)
        entry = source.patch_entry(folder / "fix.patch", "<16")
        how = source.normalized("postgres", {"cflags": "-O2", "patches": [entry]})
        recipe = json.dumps(how, sort_keys=True)
        return str(source.why(BuildSpec(spec.engine, spec.version, recipe))["key"])

    here = key_with(tmp_path / "lab-a", "--- a/x\n+++ b/x\n")
    assert key_with(tmp_path / "moved" / "lab-a", "--- a/x\n+++ b/x\n") == here
    assert key_with(tmp_path / "lab-b", "--- a/y\n+++ b/y\n") != here


def test_the_native_key_holds_what_the_flavors_flags_turn_off() -> None:
    """`-march=native -mno-avx512f ...` is not `-march=native`: the key holds what the
    compiler makes of the flavor's own target flags, and names the sets turned off."""
    from dbregress.provision.source.key import host_cpu, native

    rel = source.recipe("rocksdb", "rel")
    assert native(rel)
    cpu = host_cpu(shutil.which("gcc") or "", rel["cflags"])
    assert {"avx512f", "avx512bw", "avxvnni"} <= set(cpu["turned_off"])
    plain = host_cpu(shutil.which("gcc") or "", "-O2 -march=native")
    assert plain["turned_off"] == []
    if "native_sha256" in cpu:  # gcc says what the flags enable: -mno-avx2 is another CPU
        fewer = host_cpu(shutil.which("gcc") or "", "-O2 -march=native -mno-avx2")
        assert fewer["native_sha256"] != plain["native_sha256"]


def test_installing_another_linker_is_another_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MySQL 8.0's cmake links with lld when ld.lld is there (USE_LD_LLD): every linker
    the compiler may pick is keyed, so installing lld makes another build."""
    bin_dir = tmp_path / "bin"
    line = "mysqld  Ver 8.0.99 for Linux on x86_64 (Source distribution)"
    tree = make_cmake_tree(tmp_path / "mysql", bin_dir, line)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    spec = f"mysql@src:{tree}"
    first = inputs(spec)
    assert set(first["inputs"]["linkers"]) == {"ld", "ld.bfd", "ld.gold", "ld.lld"}
    assert "GNU ld" in first["inputs"]["linkers"]["ld"]
    if first["inputs"]["linkers"]["ld.lld"] != "absent":
        pytest.skip("this host has ld.lld already")
    wrapper(bin_dir, "ld.lld", "/usr/bin/ld")  # an lld appears on PATH
    other = inputs(spec)
    assert other["inputs"]["linkers"]["ld.lld"].startswith("GNU ld")
    assert other["key"] != first["key"]


def test_the_cxx_headers_are_keyed_by_what_owns_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C++ headers' package is the one owning the <vector> the C++ compiler
    includes (not a fixed libstdc++-12-dev); headers no package owns (a compiler's own
    under /usr/local, say) are keyed by their content."""
    bin_dir = tmp_path / "bin"
    line = "mysqld  Ver 8.0.99 for Linux on x86_64 (Source distribution)"
    tree = make_cmake_tree(tmp_path / "mysql", bin_dir, line)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    spec = f"mysql@src:{tree}"
    system = inputs(spec)["inputs"]
    headers = system["cxx_headers"]
    assert headers["header"].endswith("/vector")
    if shutil.which("dpkg-query"):
        owner = subprocess.run(
            ["dpkg-query", "-S", headers["header"]], capture_output=True, text=True, check=True
        ).stdout.split(":")[0]
        assert headers["package"] == owner and headers["version"]
    assert not [p for p in system["packages"] if p.startswith("libstdc++")]
    # a C++ compiler whose standard headers are files of its own
    own = tmp_path / "own-include"
    own.mkdir()
    (own / "vector").write_text("// my vector\n")
    cxx = wrapper(bin_dir, "my-g++", f"g++ -nostdinc++ -isystem {own}")
    monkeypatch.setenv("CXX", str(cxx))
    mine = inputs(spec)
    assert mine["inputs"]["cxx_headers"]["header"] == str(own / "vector")
    assert mine["inputs"]["cxx_headers"]["package"] == "none"
    (own / "vector").write_text("// my vector, changed\n")
    assert inputs(spec)["key"] != mine["key"]


def test_libraries_under_usr_local_are_keyed_by_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What cmake and configure find under /usr/local before the system's own is known
    to no package manager: its libraries and headers are digested."""
    from dbregress.provision.source import key

    local = tmp_path / "local"
    (local / "include").mkdir(parents=True)
    (local / "lib/python3.11").mkdir(parents=True)
    monkeypatch.setattr(key, "LOCAL_DIRS", (str(local / "include"), str(local / "lib")))
    tree = make_tree(tmp_path / "pg")
    spec = f"postgres@src:{tree}"
    first = inputs(spec)
    assert set(first["inputs"]["local"].values()) == {"empty"}
    (local / "lib/python3.11/site.py").write_text("x")  # not a library: not read
    (local / "lib/README").write_text("x")
    assert inputs(spec)["key"] == first["key"]
    (local / "lib/libsnappy.so.1").write_bytes(b"\x7fELF one")
    second = inputs(spec)
    assert second["key"] != first["key"]
    assert second["inputs"]["local"][str(local / "lib")].startswith("1 files")
    (local / "lib/libsnappy.so.1").write_bytes(b"\x7fELF two")  # rebuilt in place
    assert inputs(spec)["key"] != second["key"]
    (local / "include/snappy.h").write_text("// a header\n")
    assert inputs(spec)["inputs"]["local"][str(local / "include")] != "empty"


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_a_compilers_full_version_is_its_version_not_an_error(compiler: str) -> None:
    """clang has no -dumpfullversion: the key held "clang: error: no input files" for
    every clang, so only the binary's digest told two clangs apart."""
    from dbregress.provision.source.key import compiler_identity

    path = shutil.which(compiler)
    if path is None:
        pytest.skip(f"no {compiler} here")
    full = compiler_identity(path)["full_version"]
    assert full[:1].isdigit() and "error" not in full, full
    assert full.split(".")[0] in compiler_identity(path)["version"]
