"""The my.cnf lines that depend on the server's version, chosen in code.

The profiles beside this file (`default`, `ci`, `myrocks`) hold what every MySQL-family
version accepts; what changed between versions is decided here from the build's family
and version, as the seeds do by keeping one my.cnf per version (seed 002):

- redo: N files of `innodb_log_file_size` (old InnoDB), one file of `{wal_mb}` (MariaDB
  10.5+), or `innodb_redo_log_capacity` (MySQL 8.0.30+);
- flush method: O_DIRECT_NO_FSYNC where it exists (MySQL 5.6.7+, MariaDB 10.0-10.11),
  O_DIRECT otherwise; MariaDB 11 replaced innodb_flush_method by
  innodb_{data,log}_file_buffering (OFF is O_DIRECT; it has no O_DIRECT_NO_FSYNC);
- the history list limits the seeds set everywhere (innodb_max_purge_lag=500000,
  innodb_max_purge_lag_delay=1000000) where the delay exists (MySQL 5.6.5+, MariaDB 10.0+);
- the change buffer off for MariaDB, as the seeds' cz11a configs do (gone in MariaDB 11);
- utf8mb4 where it exists (5.5.3+), and MySQL 8's X plugin off (it would listen on TCP).
"""

from __future__ import annotations

from dbregress.engines.base import Sizes
from dbregress.provision.mysql import ServerVersion

REDO_FILES = 10  # the seeds' cz11a: ten redo files (cz11aredo1: one big one)
MIN_REDO_FILE_MB = 16


def redo_settings(server: ServerVersion, wal_mb: int) -> dict[str, str]:
    if not server.is_mariadb and server.at_least(8, 0, 30):
        return {"innodb_redo_log_capacity": f"{wal_mb}M"}
    if server.is_mariadb and server.at_least(10, 5, 0):
        return {"innodb_log_file_size": f"{wal_mb}M"}  # one file; files_in_group is gone
    files = REDO_FILES if wal_mb // REDO_FILES >= MIN_REDO_FILE_MB else 2
    return {
        "innodb_log_files_in_group": str(files),
        "innodb_log_file_size": f"{max(wal_mb // files, 4)}M",
    }


def flush_settings(server: ServerVersion) -> dict[str, str]:
    if server.is_mariadb and server.at_least(11, 0, 0):
        return {"innodb_data_file_buffering": "OFF", "innodb_log_file_buffering": "OFF"}
    no_fsync = server.at_least(10, 0, 0) if server.is_mariadb else server.at_least(5, 6, 7)
    return {"innodb_flush_method": "O_DIRECT_NO_FSYNC" if no_fsync else "O_DIRECT"}


def version_settings(server: ServerVersion, sizes: Sizes) -> dict[str, str]:
    """The version-dependent my.cnf lines for `server` (before the profile's own lines)."""
    settings: dict[str, str] = {}
    if server.at_least(5, 5, 3):
        settings["character_set_server"] = "utf8mb4"
    if not server.is_mariadb and server.at_least(8, 0, 11):
        settings["mysqlx"] = "OFF"
    settings.update(redo_settings(server, sizes.wal_mb))
    settings.update(flush_settings(server))
    if server.at_least(10, 0, 0) if server.is_mariadb else server.at_least(5, 6, 5):
        settings["innodb_max_purge_lag"] = "500000"
        settings["innodb_max_purge_lag_delay"] = "1000000"
    if server.is_mariadb and not server.at_least(11, 0, 0):
        settings["innodb_change_buffering"] = "none"
    return settings


def canonical(settings: dict[str, str]) -> dict[str, str]:
    """my.cnf treats `-` and `_` in option names alike: keep one spelling (`_`), so a lab
    setting written either way replaces the profile's line."""
    return {key.strip().replace("-", "_"): value for key, value in settings.items()}


def uses_rocksdb(settings: dict[str, str]) -> bool:
    """Whether the settings need MyRocks (a rocksdb_* option or RocksDB as the default)."""
    engine = settings.get("default_storage_engine", "").lower()
    return engine == "rocksdb" or any(key.startswith("rocksdb") for key in settings)
