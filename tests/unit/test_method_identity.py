"""The method identity's newer parts: `--dirty` in the dbregress version, the CPU features
valgrind presents (read under valgrind from the dynamic loader's diagnostics), and the
count key, which leaves dbregress's own version out of what counts depend on."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from dbregress import __version__
from dbregress.method import identity as method

GIT = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(where: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=where, env=GIT, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_version_says_dirty_for_uncommitted_changes(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git(tmp_path, "add", "code.py")
    git(tmp_path, "commit", "-q", "-m", "one")
    git(tmp_path, "tag", "v9")
    assert method.describe(tmp_path) == f"{__version__}+v9"
    (tmp_path / "code.py").write_text("x = 2\n")
    assert method.describe(tmp_path) == f"{__version__}+v9-dirty"
    git(tmp_path, "commit", "-q", "-am", "two")
    clean = method.describe(tmp_path)
    assert clean is not None and clean.startswith(f"{__version__}+v9-1-g")
    assert not clean.endswith("-dirty")
    assert method.describe(tmp_path / "nowhere") is None  # not a checkout: no version


DIAGNOSTICS = """\
env[0x0]="PATH=/usr/bin"
path.prefix="/usr"
dl_hwcap=0x2
dl_hwcap2=0x0
dl_hwcaps_subdirs_active=0x6
dl_platform="haswell"
x86.cpu_features.basic.kind=0x1
x86.cpu_features.basic.family=0x6
x86.cpu_features.basic.model=0x3c
x86.cpu_features.features[0x0].cpuid[0x2]=0x7ffafbff
x86.cpu_features.rep_movsb_threshold=0x2000
"""


def test_the_presented_cpu_is_named_from_the_loaders_cpu_lines_only() -> None:
    found = method.presented_cpu(DIAGNOSTICS)
    assert found is not None and found.startswith("haswell family 6 model 60, cpuid ")
    # The environment and paths the loader prints are not the processor's.
    moved = DIAGNOSTICS.replace("PATH=/usr/bin", "PATH=/opt/bin").replace('="/usr"', '="/o"')
    assert method.presented_cpu(moved) == found
    # Another CPUID word (AVX2 off, say) or another memcpy threshold: another processor.
    other = DIAGNOSTICS.replace("0x7ffafbff", "0x7ff8fbff")
    assert method.presented_cpu(other) not in (None, found)
    assert method.presented_cpu(DIAGNOSTICS.replace("0x2000", "0x4000")) != found
    # A loader that prints no cpu_features (glibc before 2.33): none read.
    assert method.presented_cpu('dl_platform="x86_64"\n') is None


def test_the_loader_is_found_in_an_elf_binary(tmp_path: Path) -> None:
    loader = method.elf_interpreter(Path("/bin/sh"))
    assert loader is not None and loader.is_file() and "ld" in loader.name
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert method.elf_interpreter(tmp_path / "script") is None
    assert method.elf_interpreter(tmp_path / "missing") is None


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_the_cpu_features_are_those_valgrind_presents() -> None:
    """Read under valgrind, not from the host: the loader's diagnostics under valgrind
    are what the counted code sees. glibc 2.33 or later prints them; older ones fall
    back to the host's flags, and say so."""
    features = method.cpu_features()
    assert features is not None and method.identity()["cpu_features"] == features
    libc = platform.libc_ver()
    modern = libc[0] == "glibc" and tuple(int(x) for x in libc[1].split(".")[:2]) >= (2, 33)
    if not modern:
        assert features.startswith("host flags ")
        return
    assert ", cpuid " in features and not features.startswith("host flags")
    loader = method.elf_interpreter(Path("/bin/sh"))
    assert loader is not None
    native = subprocess.run(
        [str(loader), "--list-diagnostics"], capture_output=True, text=True, check=True
    )
    host_view = method.presented_cpu(native.stdout)
    # valgrind presents a processor of its own choosing (on an AMD EPYC host, valgrind
    # 3.19 presents a Haswell); where it happens to pass the host's through unchanged,
    # the two agree, which is still what the counted code sees.
    assert host_view is not None
    print(f"valgrind presents: {features}; the host: {host_view}")


def test_the_count_key_leaves_the_dbregress_version_out() -> None:
    a = method.identity()
    commit = {**a, "dbregress": a["dbregress"] + "-1-gabcdef0-dirty"}
    assert method.key(commit) != method.key(a)
    assert method.count_key(commit) == method.count_key(a)
    assert "dbregress" not in method.COUNT_FIELDS and "cpu_features" in method.COUNT_FIELDS
    for field, value in (("cpu_features", "skylake, cpuid 00"), ("valgrind", "valgrind-3.22")):
        other = {**a, field: value}
        assert method.count_key(other) != method.count_key(a)
        (what,) = method.differences(a, other, method.COUNT_FIELDS)
        assert what.startswith(method.NAMES[field])
    assert method.count_key(None) is None


def test_build_and_step_keys_name_what_they_are_given() -> None:
    build = {"source": "maven", "sha256": "ab" * 8, "spec": "rocksdb@10.2.1"}
    assert method.build_key(build) == method.build_key(dict(reversed(build.items())))
    assert method.build_key({**build, "sha256": "cd" * 8}) != method.build_key(build)
    assert method.build_key(None) is None and method.build_key({}) is None
    step = method.step_key({"name": "readrandom", "keys": 1000}, "default", {})
    assert step == method.step_key({"keys": 1000, "name": "readrandom"}, "default", {})
    assert step != method.step_key({"name": "readrandom", "keys": 2000}, "default", {})
    assert step != method.step_key({"name": "readrandom", "keys": 1000}, "iobuf", {})
