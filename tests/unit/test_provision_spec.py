"""Build specs, version strings, the Maven version list and local builds (no network)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from dbregress import provision
from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision import BuildSpec, libenv, local, maven
from dbregress.provision.versioning import closest, normalize, sort_versions, version_key

AVAILABLE = ["9.6.24", "12.19.0", "12.20.0", "12.22.0", "16.6.0", "17.0.0", "17.2.0", "17.4.0"]


@pytest.mark.parametrize(
    ("text", "engine", "version"),
    [
        ("postgres@17.2.0", "postgres", "17.2.0"),
        ("postgres@17.2", "postgres", "17.2"),
        ("postgres@system", "postgres", "system"),
        ("postgres@/opt/pg", "postgres", "/opt/pg"),
    ],
)
def test_parse_spec(text: str, engine: str, version: str) -> None:
    spec = BuildSpec.parse(text)
    assert (spec.engine, spec.version) == (engine, version)
    assert str(spec) == text


@pytest.mark.parametrize("text", ["postgres", "postgres@", "@17.2", "oracle@19"])
def test_parse_spec_rejects(text: str) -> None:
    with pytest.raises(BuildNotFound):
        BuildSpec.parse(text)


def test_normalize_and_sort() -> None:
    assert normalize("17.2") == "17.2.0"
    assert normalize(" 17.2.0 ") == "17.2.0"
    assert normalize("10.11.0-1") == "10.11.0-1"
    assert version_key("10.11.0-1") == (10, 11, 0, 1)
    assert sort_versions(["17.10.0", "9.6.24", "17.9.0", "10.11.0-1", "10.11.0"]) == [
        "9.6.24",
        "10.11.0",
        "10.11.0-1",
        "17.9.0",
        "17.10.0",
    ]


def test_closest_prefers_same_major() -> None:
    assert closest("17.3.0", AVAILABLE, count=3) == ["17.0.0", "17.2.0", "17.4.0"]
    assert closest("12.21.0", AVAILABLE, count=2) == ["12.20.0", "12.22.0"]
    assert closest("14.1.0", AVAILABLE, count=2) == ["12.22.0", "16.6.0"]
    assert closest("99.0", AVAILABLE, count=1) == ["17.4.0"]
    assert closest("17.99.0", AVAILABLE) == ["17.0.0", "17.2.0", "17.4.0"]  # the whole major


def test_unknown_version_names_closest() -> None:
    with pytest.raises(BuildNotFound, match=r"17\.2\.0, 17\.4\.0") as e:
        maven.check_version("postgres", "17.3.0", AVAILABLE)
    assert "dbregress versions postgres" in str(e.value)
    maven.check_version("postgres", "17.2.0", AVAILABLE)


def test_parse_metadata() -> None:
    xml = """<?xml version="1.0"?><metadata><versioning><versions>
      <version>12.20.0</version><version>17.2.0</version></versions></versioning></metadata>"""
    assert maven.parse_metadata(xml) == ["12.20.0", "17.2.0"]


def test_mvn_errors_skip_boilerplate() -> None:
    output = (
        "\x1b[0m\x1b[0m[ERROR] Failed to execute goal: Unable to find artifact x\n"
        "[ERROR] \n[ERROR] Re-run Maven using the -X switch\n[ERROR] [Help 1] http://x\n"
    )
    assert maven.mvn_errors(output) == "[ERROR] Failed to execute goal: Unable to find artifact x"


def test_mvn_missing_is_actionable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProvisionError, match="apt-get install maven"):
        maven.run_mvn(["--version"], tmp_path, "testing")


def test_version_list_cached_for_a_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBREGRESS_CACHE", str(tmp_path))
    calls: list[str] = []

    def resolve(engine: str) -> list[str]:
        calls.append(engine)
        return AVAILABLE

    monkeypatch.setattr(maven, "_resolve_versions", resolve)
    assert provision.versions("postgres") == AVAILABLE
    assert provision.versions("postgres") == AVAILABLE
    assert calls == ["postgres"]

    cached = tmp_path / "postgres" / "versions.json"
    data = json.loads(cached.read_text())
    data["fetched_at"] = time.time() - 2 * 24 * 3600
    cached.write_text(json.dumps(data))

    def offline(engine: str) -> list[str]:
        raise ProvisionError("no network")

    monkeypatch.setattr(maven, "_resolve_versions", offline)
    assert provision.versions("postgres") == AVAILABLE  # a stale list beats none
    cached.unlink()
    with pytest.raises(ProvisionError, match="no network"):
        provision.versions("postgres")


def test_versions_unknown_engine() -> None:
    with pytest.raises(BuildNotFound, match="unknown engine"):
        provision.versions("oracle")


def test_fetch_unknown_version_before_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DBREGRESS_CACHE", str(tmp_path))
    monkeypatch.setattr(maven, "available_versions", lambda engine: AVAILABLE)
    monkeypatch.setattr(maven, "run_mvn", lambda *a: pytest.fail("must not download"))
    with pytest.raises(BuildNotFound, match="closest available"):
        provision.fetch(BuildSpec.parse("postgres@17.3"))


def _fake_basedir(root: Path, version: str = "16.4") -> Path:
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("initdb", "postgres"):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\necho 'postgres (PostgreSQL) {version}'\n")
        script.chmod(0o755)
    return root


def test_fetch_path(tmp_path: Path) -> None:
    basedir = _fake_basedir(tmp_path / "pg")
    build = provision.fetch(BuildSpec("postgres", str(basedir)))
    assert build.version_string == "postgres (PostgreSQL) 16.4"
    assert build.identity == {
        "source": "path",
        "path": str(basedir),
        "version_string": "postgres (PostgreSQL) 16.4",
        # the binary's digest: a rebuild in place is another build (its counts apart)
        "binary_sha256": hashlib.sha256((basedir / "bin" / "postgres").read_bytes()).hexdigest()[
            :16
        ],
    }


def test_fetch_path_errors(tmp_path: Path) -> None:
    with pytest.raises(BuildNotFound, match="not a directory"):
        provision.fetch(BuildSpec("postgres", str(tmp_path / "absent")))
    (tmp_path / "bin").mkdir()
    with pytest.raises(BuildNotFound, match="missing executable bin/postgres, bin/initdb"):
        provision.fetch(BuildSpec("postgres", str(tmp_path)))


def test_system_picks_newest_major(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "SYSTEM_ROOT", tmp_path)
    with pytest.raises(BuildNotFound, match="apt-get install postgresql"):
        provision.fetch(BuildSpec.parse("postgres@system"))
    _fake_basedir(tmp_path / "9.6", "9.6.24")
    _fake_basedir(tmp_path / "15", "15.8")
    (tmp_path / "16").mkdir()  # client only: no server binaries
    build = provision.fetch(BuildSpec.parse("postgres@system"))
    assert build.basedir == tmp_path / "15"
    assert build.identity["source"] == "system"


def test_library_env_puts_build_lib_first(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    env = libenv.library_env(tmp_path)
    assert env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == str(tmp_path / "lib")


def test_fetch_without_version_list_still_tries_mvn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DBREGRESS_CACHE", str(tmp_path))

    def offline(engine: str) -> list[str]:
        raise ProvisionError("no network")

    def mvn(args: list[str], cwd: Path, what: str) -> None:
        raise ProvisionError(f"{what}: mvn failed")

    monkeypatch.setattr(maven, "available_versions", offline)
    monkeypatch.setattr(maven, "run_mvn", mvn)
    with pytest.raises(ProvisionError, match=r"fetching postgres@17\.2: mvn failed"):
        provision.fetch(BuildSpec.parse("postgres@17.2"))
    assert [p.name for p in (tmp_path / "postgres").iterdir()] == [".17.2.0.lock"]
