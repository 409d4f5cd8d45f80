"""Which Engine class runs a build, by the engine name of its spec (provision's
BuildSpec.engine); each engine's module is imported only when its class is asked for."""

from __future__ import annotations

from dbregress.engines.base import Engine
from dbregress.errors import DbregressError


def engine_class(name: str) -> type[Engine]:
    """The lifecycle of engine `name` (postgres, mariadb, mysql, rocksdb, null)."""
    if name == "postgres":
        from dbregress.engines.postgres import PostgresEngine

        return PostgresEngine
    if name in ("mariadb", "mysql"):
        from dbregress.engines.mysql import MysqlEngine

        return MysqlEngine
    if name == "rocksdb":
        from dbregress.engines.rocksdb import RocksdbEngine

        return RocksdbEngine
    if name == "null":
        from dbregress.engines.null import NullEngine

        return NullEngine
    raise DbregressError(f"no engine lifecycle for {name!r}")
