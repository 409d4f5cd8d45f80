"""RocksDB builds: specs, versions, jars without the linux x86-64 library, local libraries.

No network: mvn is replaced by a function that writes a small fake jar.
"""

from __future__ import annotations

import json
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from dbregress import provision
from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision import BuildSpec, maven, rocksdb
from dbregress.provision.versioning import closest

SYSTEM_LIB = Path("/usr/lib/x86_64-linux-gnu/librocksdb.so.7.8")
needs_system_lib = pytest.mark.skipif(
    not SYSTEM_LIB.exists(), reason="apt-get install librocksdb7.8"
)
OTHER_PLATFORMS = [
    "librocksdbjni-linux64-musl.so",
    "librocksdbjni-linux-aarch64.so",
    "librocksdbjni-osx-arm64.jnilib",
    "librocksdbjni-win64.dll",
]


def fake_jar(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        jar.writestr("org/rocksdb/RocksDB.class", b"\xca\xfe\xba\xbe")
        for name, data in members.items():
            jar.writestr(name, data)
    return path


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("DBREGRESS_CACHE", str(root))
    return root


def mvn_writing(monkeypatch: pytest.MonkeyPatch, members: dict[str, bytes]) -> list[str]:
    """Replace mvn: `dependency:copy` writes a fake jar; returns the artifacts asked for."""
    asked: list[str] = []

    def run_mvn(args: list[str], cwd: Path, what: str) -> None:
        artifact = next(a.split("=", 1)[1] for a in args if a.startswith("-Dartifact="))
        out = Path(next(a.split("=", 1)[1] for a in args if a.startswith("-DoutputDirectory=")))
        asked.append(artifact)
        fake_jar(out / f"rocksdbjni-{artifact.rsplit(':', 1)[1]}.jar", members)

    monkeypatch.setattr(maven, "run_mvn", run_mvn)
    monkeypatch.setattr(maven, "available_versions", lambda engine: ["6.20.3", "6.22.1", "9.9.9"])
    return asked


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("rocksdb@10.2.1", "10.2.1"),
        ("rocksdb@system", "system"),
        ("rocksdb@/opt/rocksdb/librocksdb.so", "/opt/rocksdb/librocksdb.so"),
    ],
)
def test_parse_rocksdb_specs(text: str, version: str) -> None:
    spec = BuildSpec.parse(text)
    assert (spec.engine, spec.version) == ("rocksdb", version)
    assert "rocksdb" in provision.ENGINES


def test_parse_relative_library_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = BuildSpec.parse("rocksdb@build/librocksdb.so.9.1.0")
    assert spec.is_path and spec.version == str(tmp_path / "build/librocksdb.so.9.1.0")


def test_version_from_name(tmp_path: Path) -> None:
    assert rocksdb.version_from_name(Path("/x/librocksdb.so.7.8.3")) == "7.8.3"
    assert rocksdb.version_from_name(Path("/x/librocksdb.so.9.1")) == "9.1"
    link = tmp_path / "librocksdb.so"
    link.symlink_to(tmp_path / "librocksdb.so.8.11.4")
    assert rocksdb.version_from_name(link) == "8.11.4"
    assert rocksdb.version_from_name(Path("/x/librocksdbjni-linux64.so")) is None


def test_closest_rocksdb_versions() -> None:
    available = ["6.20.3", "6.22.1", "6.22.1.1", "6.25.3", "7.10.2", "8.11.4", "10.2.1"]
    assert closest("6.23.0", available, count=3) == ["6.22.1", "6.22.1.1", "6.25.3"]
    assert closest("9.0.0", available, count=2) == ["8.11.4", "10.2.1"]


def test_jar_without_linux64_names_what_it_holds(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = mvn_writing(monkeypatch, {name: b"\x7fELF" for name in OTHER_PLATFORMS})
    monkeypatch.setattr(rocksdb, "VERIFIED_JARS", ("5.0.1", "6.20.3", "6.22.1", "7.10.2"))
    with pytest.raises(BuildNotFound) as e:
        provision.fetch(BuildSpec.parse("rocksdb@6.22.1"))
    message = str(e.value)
    assert asked == ["org.rocksdb:rocksdbjni:6.22.1"]
    assert "rocksdb@6.22.1" in message and "librocksdbjni-linux64.so" in message
    assert all(name in message for name in OTHER_PLATFORMS)
    suggested = message.split("versions whose jar has it: ")[1].split(" (")[0].split(", ")
    assert suggested == ["6.20.3"]  # the same major first, never the version itself
    # nothing half-installed: only the lock file is left
    assert [p.name for p in (cache_dir / "rocksdb").iterdir()] == [".6.22.1.lock"]


def test_jar_with_no_native_library(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mvn_writing(monkeypatch, {})
    with pytest.raises(BuildNotFound, match="holds no native library at all; versions whose"):
        provision.fetch(BuildSpec.parse("rocksdb@6.20.3"))


def test_unknown_version_lists_closest(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = mvn_writing(monkeypatch, {})
    with pytest.raises(BuildNotFound, match=r"closest available: 6\.20\.3, 6\.22\.1"):
        provision.fetch(BuildSpec.parse("rocksdb@6.21.0"))
    assert asked == []  # no 50-75 MB download for a version that does not exist


def test_versions_come_from_maven_metadata(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listing = cache_dir / "rocksdb" / "versions.json"
    listing.parent.mkdir(parents=True)
    listing.write_text(json.dumps({"fetched_at": time.time(), "versions": ["6.22.1", "10.2.1"]}))
    assert provision.versions("rocksdb") == ["6.22.1", "10.2.1"]
    assert maven.coordinates("rocksdb", "10.2.1") == "org.rocksdb:rocksdbjni:10.2.1"


@needs_system_lib
def test_jar_library_is_extracted_alone_and_reused(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake jar holding Debian's library under the JNI name: only it is extracted."""
    library = SYSTEM_LIB.read_bytes()
    members = {name: b"not this one" for name in OTHER_PLATFORMS}
    asked = mvn_writing(monkeypatch, {**members, "librocksdbjni-linux64.so": library})
    build = provision.fetch(BuildSpec.parse("rocksdb@6.22.1"))
    assert build.library == cache_dir / "rocksdb/6.22.1/librocksdbjni-linux64.so"
    assert build.library_version == "7.8.3"  # what the library says beats the jar's name
    assert sorted(p.name for p in build.basedir.iterdir()) == [
        "dbregress-build.json",
        "librocksdbjni-linux64.so",
    ]
    assert build.library.stat().st_mode & 0o777 == 0o755
    assert build.identity["coordinates"] == "org.rocksdb:rocksdbjni:6.22.1"
    again = provision.fetch(BuildSpec.parse("rocksdb@6.22.1"))
    assert again.library == build.library and len(asked) == 1
    assert "6.22.1" in rocksdb.verified_versions()


def test_probe_rejects_what_is_not_rocksdb(tmp_path: Path) -> None:
    garbage = tmp_path / "librocksdb.so"
    garbage.write_bytes(b"not an ELF file")
    with pytest.raises(ProvisionError, match="cannot be loaded"):
        rocksdb.probe(garbage)
    libm = next(Path("/usr/lib/x86_64-linux-gnu").glob("libm.so.6"), None)
    if libm is not None:
        with pytest.raises(ProvisionError, match="does not export rocksdb_open"):
            rocksdb.probe(libm)


def test_missing_user_library(tmp_path: Path) -> None:
    with pytest.raises(BuildNotFound, match="does not exist"):
        provision.fetch(BuildSpec.parse(f"rocksdb@{tmp_path}/librocksdb.so"))
    with pytest.raises(BuildNotFound, match=r"holds no librocksdb\.so"):
        provision.fetch(BuildSpec.parse(f"rocksdb@{tmp_path}"))


@needs_system_lib
def test_user_library_version_from_the_library(tmp_path: Path) -> None:
    copy = tmp_path / "librocksdb.so"  # no version in the name: the library must tell
    shutil.copy(SYSTEM_LIB, copy)
    build = provision.fetch(BuildSpec.parse(f"rocksdb@{tmp_path}"))
    assert (build.library, build.library_version) == (copy, "7.8.3")
    assert build.identity["source"] == "path" and len(build.identity["sha256"]) == 64


def test_unknown_version_of_a_user_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = tmp_path / "librocksdb.so"
    library.write_bytes(b"\x7fELF")
    monkeypatch.setattr(rocksdb, "probe", lambda path: None)
    with pytest.raises(ProvisionError, match="cannot tell the RocksDB version"):
        provision.fetch(BuildSpec.parse(f"rocksdb@{library}"))


def test_system_library_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rocksdb, "SYSTEM_LIB_DIRS", (tmp_path,))
    with pytest.raises(BuildNotFound, match=r"apt-get install librocksdb7\.8"):
        provision.fetch(BuildSpec.parse("rocksdb@system"))


def test_system_library_picks_newest_soname(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("librocksdb.so.6.11", "librocksdb.so.7.8", "librocksdb.so.7.8.3", "librocksdb.a"):
        (tmp_path / name).write_bytes(b"")
    monkeypatch.setattr(rocksdb, "SYSTEM_LIB_DIRS", (tmp_path,))
    assert rocksdb.system_library() == tmp_path / "librocksdb.so.7.8"
