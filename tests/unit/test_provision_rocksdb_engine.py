"""RocksDB presets, settings and capability checks, and the embedded engine's lifecycle.

No library is loaded here: the Build points at a path that is never opened.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dbregress import configs
from dbregress.engines.base import EngineOptions, Sizes
from dbregress.engines.rocksdb import OPTIONS, RocksdbEngine
from dbregress.model.errors import ConfigRejected, EngineError
from dbregress.provision import Build, BuildSpec

SCHEMA = json.loads((Path(__file__).parents[2] / "schema/step-spec.schema.json").read_text())
ROCKSDB_SCHEMA = next(
    e
    for e in SCHEMA["properties"]["engine"]["oneOf"]
    if e["properties"]["driver"]["const"] == "rocksdb"
)


def build(version: str = "10.2.1") -> Build:
    library = Path(f"/cache/rocksdb/{version}/librocksdbjni-linux64.so")
    return Build(
        BuildSpec("rocksdb", version), library.parent, f"RocksDB {version}", {}, library, version
    )


def engine(
    tmp_path: Path,
    preset: str = "byrx",
    settings: dict[str, str] | None = None,
    version: str = "10.2.1",
    data_mb: int = 400,
) -> RocksdbEngine:
    options = EngineOptions(
        workdir=tmp_path / "work",
        log_path=tmp_path / "results" / "server.log",
        config_name=preset,
        settings=settings or {},
        sizes=Sizes(cache_mb=0, wal_mb=0, data_mb=data_mb),
    )
    return RocksdbEngine(build(version), options)


def test_presets_are_shipped() -> None:
    assert configs.profiles("rocksdb") == ["byrx", "iobuf", "iodir"]


@pytest.mark.parametrize(
    ("preset", "data_mb", "cache_mb", "direct_io"),
    [
        ("byrx", 400, 600, False),  # 1.5 x the data
        ("byrx", 10, 64, False),  # at least 64 MB
        ("iobuf", 400, 40, False),  # a tenth of the data
        ("iobuf", 10, 8, False),  # at least 8 MB
        ("iodir", 4001, 401, True),  # rounded up
    ],
)
def test_preset_sizing(
    tmp_path: Path, preset: str, data_mb: int, cache_mb: int, direct_io: bool
) -> None:
    options = engine(tmp_path, preset, data_mb=data_mb).rocksdb_options()
    assert options["cache_mb"] == cache_mb
    assert options["direct_io"] is direct_io
    assert options["block_size"] == 8192 and options["bloom_bits"] == 10
    assert (options["compression"], options["cache_type"]) == ("none", "lru")
    assert options["write_buffer_mb"] == 64


def test_size_format_errors() -> None:
    assert format(configs.Megabytes(100), "x0.25,min8,max20") == "20"
    assert format(configs.Megabytes(3), "") == "3"
    with pytest.raises(ValueError, match="bad size format"):
        format(configs.Megabytes(3), "times2")


def test_option_table_matches_the_schema() -> None:
    properties = ROCKSDB_SCHEMA["properties"]["options"]["properties"]
    assert set(OPTIONS) == set(properties)
    kinds = {"bool": "boolean", "int": "integer", "number": "number"}
    for key, option in OPTIONS.items():
        schema = properties[key]
        if option.kind == "enum":
            assert option.choices == tuple(schema["enum"]), key
        else:
            assert kinds[option.kind] == schema["type"], key
            assert option.minimum == schema.get("minimum"), key


def test_settings_override_and_are_typed(tmp_path: Path) -> None:
    settings = {
        "cache_mb": "128",
        "bloom_bits": "9.5",
        "direct_io": "on",
        "sync": "true",
        "cache_type": "hyper_clock",
        "estimated_entry_charge": "8192",
        "block_align": "true",
    }
    e = engine(tmp_path, "iobuf", settings, version="11.1.1")
    options = e.rocksdb_options()
    assert options["cache_mb"] == 128 and options["bloom_bits"] == 9.5
    assert options["direct_io"] is True and options["sync"] is True
    assert e.settings_applied()["direct_io"] == "true"
    assert e.settings_applied()["bloom_bits"] == "9.5"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"cache_size": "64"}, "unknown rocksdb option 'cache_size' in the lab's settings"),
        ({"cache_mb": "0"}, r"cache_mb = '0' .* allowed: an integer >= 1"),
        ({"cache_mb": "1.5"}, r"cache_mb = '1\.5' .* allowed: an integer >= 1"),
        ({"bloom_bits": "-1"}, r"bloom_bits = '-1' .* allowed: a number >= 0"),
        ({"bloom_bits": "nan"}, r"bloom_bits = 'nan'"),
        ({"direct_io": "maybe"}, r"direct_io = 'maybe' .* allowed: true or false"),
        ({"compression": "zstd"}, r"compression = 'zstd' .*allowed: none, lz4"),
        ({"cache_type": "clock"}, r"allowed: lru, hyper_clock, auto_hyper_clock"),
    ],
)
def test_bad_settings_are_rejected(tmp_path: Path, settings: dict[str, str], message: str) -> None:
    e = engine(tmp_path, "byrx", settings)
    with pytest.raises(ConfigRejected, match=message) as info:
        e.start()
    assert "preset 'byrx'" in str(info.value)
    assert not (tmp_path / "work").exists()  # refused before anything was created


@pytest.mark.parametrize(
    ("version", "settings", "message"),
    [
        ("7.8.3", {"cache_type": "hyper_clock"}, r"hyper_clock needs RocksDB 8\.1 .* 7\.8\.3"),
        ("8.6.7", {"cache_type": "auto_hyper_clock"}, r"needs RocksDB 8\.7 .* 8\.6\.7"),
        ("10.2.1", {"block_align": "true"}, r"block_align = true needs RocksDB 11\.0"),
        ("6.22.1", {"bloom_bits": "9.9"}, r"bloom_bits = 9\.9 is fractional.* 6\.22\.1"),
        ("10.2.1", {"estimated_entry_charge": "4096"}, "only to cache_type = hyper_clock"),
    ],
)
def test_capabilities_by_version(
    tmp_path: Path, version: str, settings: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigRejected, match=message) as info:
        engine(tmp_path, "byrx", settings, version=version).start()
    assert f"rocksdb@{version}" in str(info.value)


@pytest.mark.parametrize(
    ("version", "settings", "typed"),
    [
        ("8.1.1", {"cache_type": "hyper_clock"}, "hyper_clock"),
        ("8.7.3", {"cache_type": "auto_hyper_clock"}, "auto_hyper_clock"),
        ("11.0.4", {"block_align": "true"}, True),
        ("6.22.1", {"bloom_bits": "12"}, 12),  # integral is fine before 6.24
    ],
)
def test_capabilities_present(
    tmp_path: Path, version: str, settings: dict[str, str], typed: object
) -> None:
    e = engine(tmp_path, "byrx", settings, version=version)
    ((key, _),) = settings.items()
    value = e.rocksdb_options()[key]
    assert (value, type(value)) == (typed, type(typed))  # accepted, typed for the spec
    assert e.connection()["options"][key] == typed and e.connection()["version"] == version


def test_unknown_preset(tmp_path: Path) -> None:
    with pytest.raises(ConfigRejected, match="'byos'; shipped: byrx, iobuf, iodir"):
        engine(tmp_path, "byos").start()


def test_lifecycle_and_connection(tmp_path: Path) -> None:
    e = engine(tmp_path, "iobuf", {"sync": "yes"})
    e.start()
    assert e.db_dir.is_dir() and list(e.db_dir.iterdir()) == []
    assert e.db_dir.parent.stat().st_mode & 0o777 == 0o700
    e.check_alive()
    spec: dict[str, Any] = {
        "spec_version": 3,
        "engine": e.connection(),
        "workload": {"kind": "kv", "step": "fillseq"},
        "clients": 1,
        "seed": 1,
    }
    jsonschema.validate(spec, SCHEMA)
    assert spec["engine"]["db_path"] == str(tmp_path / "work" / "db")
    assert spec["engine"]["version"] == "10.2.1"
    assert spec["engine"]["options"]["sync"] is True
    (e.db_dir / "000004.sst").write_bytes(b"x" * 10000)
    (e.db_dir / "LOG").write_text("RocksDB version: 10.2.1\nlast line\n")
    assert e.data_size_bytes() >= 10000
    assert e.log_tail(1) == "last line"
    with pytest.raises(EngineError, match="embedded"):
        e.server_pid()
    e.stop()
    e.stop()  # idempotent
    assert (tmp_path / "results" / "server.log").read_text().endswith("last line\n")


def test_workdir_must_be_new(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "old").write_text("")
    with pytest.raises(EngineError, match="not empty"):
        engine(tmp_path).start()


def test_read_only_filesystem_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def read_only(path: Any, flags: int, mode: int = 0o777) -> int:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    e = engine(tmp_path)
    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(EngineError, match=f"{tmp_path}/work/db is not writable: Read-only"):
        e.start()


def test_no_o_direct_on_the_filesystem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = os.open

    def no_direct(path: Any, flags: int, mode: int = 0o777) -> int:
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", no_direct)
    engine(tmp_path / "a", "iobuf").start()
    with pytest.raises(ConfigRejected, match="does not support O_DIRECT"):
        engine(tmp_path / "b", "iodir").start()


def test_full_filesystem_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Full:
        f_bavail, f_frsize = 10, 4096

    monkeypatch.setattr(os, "statvfs", lambda path: Full())
    with pytest.raises(EngineError, match=r"work/db has 0 MB free .* about 992 MB"):
        engine(tmp_path, data_mb=400).start()


def test_build_without_library(tmp_path: Path) -> None:
    options = EngineOptions(tmp_path / "w", tmp_path / "log", "byrx")
    with pytest.raises(EngineError, match="not a RocksDB library build"):
        RocksdbEngine(Build(BuildSpec("rocksdb", "x"), tmp_path, "?"), options)
