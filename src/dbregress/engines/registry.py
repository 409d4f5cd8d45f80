"""Which Engine class runs a build, by the engine name of its spec (provision's
BuildSpec.engine)."""

from __future__ import annotations

from dbregress.engines.base import Engine
from dbregress.engines.mysql import MysqlEngine
from dbregress.engines.null import NullEngine
from dbregress.engines.postgres import PostgresEngine
from dbregress.engines.rocksdb import RocksdbEngine
from dbregress.model.errors import DbregressError

ENGINES: dict[str, type[Engine]] = {
    "postgres": PostgresEngine,
    "mariadb": MysqlEngine,
    "mysql": MysqlEngine,
    "rocksdb": RocksdbEngine,
    "null": NullEngine,
}


def engine_class(name: str) -> type[Engine]:
    """The lifecycle of engine `name` (postgres, mariadb, mysql, rocksdb, null)."""
    try:
        return ENGINES[name]
    except KeyError:
        raise DbregressError(f"no engine lifecycle for {name!r}") from None
