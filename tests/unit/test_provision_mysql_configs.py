"""my.cnf profiles for the MySQL family: version-dependent lines, overrides, MyRocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbregress import configs
from dbregress.configs import mysql as mysql_configs
from dbregress.engines.base import EngineOptions, Sizes
from dbregress.engines.mysql import MysqlEngine
from dbregress.model.errors import ConfigRejected
from dbregress.provision import Build, BuildSpec
from dbregress.provision.mysql import ServerVersion

SIZES = Sizes(cache_mb=512, wal_mb=1000)


def _server(flavor: str, *version: int) -> ServerVersion:
    return ServerVersion(flavor, (version[0], version[1], version[2]))


@pytest.mark.parametrize(
    ("server", "redo", "flush"),
    [
        (
            _server("mariadb", 10, 1, 8),
            {"innodb_log_files_in_group": "10", "innodb_log_file_size": "100M"},
            {"innodb_flush_method": "O_DIRECT_NO_FSYNC"},
        ),
        (
            _server("mariadb", 10, 4, 33),
            {"innodb_log_files_in_group": "10", "innodb_log_file_size": "100M"},
            {"innodb_flush_method": "O_DIRECT_NO_FSYNC"},
        ),
        (
            _server("mariadb", 10, 11, 5),
            {"innodb_log_file_size": "1000M"},
            {"innodb_flush_method": "O_DIRECT_NO_FSYNC"},
        ),
        (
            _server("mariadb", 11, 4, 5),
            {"innodb_log_file_size": "1000M"},
            {"innodb_data_file_buffering": "OFF", "innodb_log_file_buffering": "OFF"},
        ),
        (
            _server("mysql", 5, 6, 51),
            {"innodb_log_files_in_group": "10", "innodb_log_file_size": "100M"},
            {"innodb_flush_method": "O_DIRECT_NO_FSYNC"},
        ),
        (
            _server("mysql", 5, 6, 5),
            {"innodb_log_files_in_group": "10", "innodb_log_file_size": "100M"},
            {"innodb_flush_method": "O_DIRECT"},
        ),
        (
            _server("percona", 8, 0, 28),
            {"innodb_log_files_in_group": "10", "innodb_log_file_size": "100M"},
            {"innodb_flush_method": "O_DIRECT_NO_FSYNC"},
        ),
        (
            _server("mysql", 8, 0, 36),
            {"innodb_redo_log_capacity": "1000M"},
            {"innodb_flush_method": "O_DIRECT_NO_FSYNC"},
        ),
    ],
)
def test_redo_and_flush_per_version(
    server: ServerVersion, redo: dict[str, str], flush: dict[str, str]
) -> None:
    assert mysql_configs.redo_settings(server, SIZES.wal_mb) == redo
    assert mysql_configs.flush_settings(server) == flush


def test_small_redo_uses_two_files() -> None:
    assert mysql_configs.redo_settings(_server("mysql", 5, 7, 44), 64) == {
        "innodb_log_files_in_group": "2",
        "innodb_log_file_size": "32M",
    }


def test_version_settings_follow_the_seeds() -> None:
    maria_10 = mysql_configs.version_settings(_server("mariadb", 10, 2, 11), SIZES)
    assert maria_10["innodb_max_purge_lag"] == "500000"
    assert maria_10["innodb_max_purge_lag_delay"] == "1000000"
    assert maria_10["innodb_change_buffering"] == "none"
    assert maria_10["character_set_server"] == "utf8mb4"
    assert "mysqlx" not in maria_10
    maria_11 = mysql_configs.version_settings(_server("mariadb", 11, 4, 5), SIZES)
    assert "innodb_change_buffering" not in maria_11  # removed in MariaDB 11
    mysql_8 = mysql_configs.version_settings(_server("mysql", 8, 0, 36), SIZES)
    assert mysql_8["mysqlx"] == "OFF"  # the X plugin would listen on TCP 33060
    assert "innodb_change_buffering" not in mysql_8
    old = mysql_configs.version_settings(_server("mysql", 5, 5, 1), SIZES)
    assert "innodb_max_purge_lag_delay" not in old and "character_set_server" not in old


def test_profiles_are_shipped() -> None:
    assert configs.profiles("mysql") == ["ci", "default", "myrocks"]
    for name in configs.profiles("mysql"):
        rendered = configs.render("mysql", name, SIZES, {})
        assert rendered["performance_schema"] == "OFF"
    assert configs.render("mysql", "default", SIZES, {})["innodb_buffer_pool_size"] == "512M"
    ci = configs.render("mysql", "ci", SIZES, {})
    assert ci["innodb_flush_log_at_trx_commit"] == "2" and ci["sync_binlog"] == "0"
    rocks = configs.render("mysql", "myrocks", SIZES, {})
    assert rocks["default_storage_engine"] == "rocksdb"
    assert rocks["rocksdb_block_cache_size"] == "512M"


def _engine(
    tmp_path: Path, version_string: str, config: str = "default", **kw: object
) -> MysqlEngine:
    basedir = tmp_path / "build"
    (basedir / "bin").mkdir(parents=True, exist_ok=True)
    (basedir / "bin" / "mysqld").write_text("#!/bin/sh\n")
    (basedir / "share" / "english").mkdir(parents=True, exist_ok=True)
    (basedir / "share" / "english" / "errmsg.sys").write_text("x")
    build = Build(BuildSpec("mysql", str(basedir)), basedir, version_string)
    options = EngineOptions(
        workdir=tmp_path / "work",
        log_path=tmp_path / "server.log",
        config_name=config,
        sizes=SIZES,
        **kw,  # type: ignore[arg-type]
    )
    return MysqlEngine(build, options)


MARIADB_10_11 = "mysqld Ver 10.11.5-MariaDB for linux-systemd on x86_64 (MariaDB Server)"


def test_settings_applied_order_and_overrides(tmp_path: Path) -> None:
    overrides = {"innodb-flush-method": "fsync", "innodb_buffer_pool_size": "1G"}
    engine = _engine(tmp_path, MARIADB_10_11, settings=overrides)
    settings = engine.settings_applied()
    assert list(settings)[:5] == ["basedir", "datadir", "socket", "pid_file", "skip_networking"]
    assert settings["skip_networking"] == ""
    assert settings["socket"] == str(tmp_path / "work" / "socket" / "mysqld.sock")
    assert settings["lc_messages_dir"] == str(tmp_path / "build" / "share")
    assert settings["innodb_flush_method"] == "fsync"  # the lab's setting, in either spelling
    assert "innodb-flush-method" not in settings
    assert settings["innodb_buffer_pool_size"] == "1G"
    assert settings["innodb_log_file_size"] == "1000M"
    assert "log_error" not in settings  # stderr is dbregress's log file
    assert engine.connection() == {
        "driver": "mysql",
        "socket": settings["socket"],
        "user": "root",
        "database": "test",
        "storage_engine": "InnoDB",
    }


def test_unknown_profile_lists_shipped(tmp_path: Path) -> None:
    with pytest.raises(ConfigRejected, match="shipped: ci, default, myrocks"):
        _engine(tmp_path, MARIADB_10_11, config="cz11a").settings_applied()


def test_myrocks_needs_the_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MysqlEngine, "_help_text", lambda self: "--innodb-foo\n")
    engine = _engine(tmp_path, MARIADB_10_11, config="myrocks")
    with pytest.raises(ConfigRejected, match="has no MyRocks, which config profile 'myrocks'"):
        engine.settings_applied()
    plugin_dir = tmp_path / "build" / "lib" / "plugin"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "ha_rocksdb.so").write_text("elf")
    settings = _engine(tmp_path, MARIADB_10_11, config="myrocks").settings_applied()
    assert settings["plugin_load_add"] == "ha_rocksdb.so"
    assert settings["plugin_dir"] == str(plugin_dir)


def test_myrocks_compiled_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MysqlEngine, "_help_text", lambda self: "  --rocksdb  Enable\n")
    engine = _engine(tmp_path, "mysqld Ver 8.0.32 for Linux (Source distribution)", "myrocks")
    assert "plugin_load_add" not in engine.settings_applied()
    assert engine.connection()["storage_engine"] == "RocksDB"
    assert engine.settings_applied()["innodb_redo_log_capacity"] == "1000M"
