//! MySQL, MariaDB, Percona and MyRocks over a unix socket, through the minimal protocol
//! client in `mywire`. Statements are prepared once per connection; result rows are
//! counted, never decoded. The storage engine (InnoDB or RocksDB) is this driver's
//! business: it picks the table's ENGINE and the post-write cleanup.

use super::dialect::{Dialect, MYSQL};
use super::micro::{LoadCache, MicroConn, StmtCache};
use super::mywire::{MyClient, MyError, Prepared};
use super::sql::{self, StmtKey, TableStmts};
use super::{Conn, DbError, DbResult, Driver, InsertRow, Inserted, RangeIndex, Table};
use crate::engine_stats::{INNODB_STATUS, MYROCKS_STATUS};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A prepared statement takes at most 65535 parameters.
pub(super) const MAX_PARAMS: usize = 65_535;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors a retry may resolve: lock wait timeout, deadlock, duplicate key (two
/// clients re-inserting the same deleted id, as sysbench allows), record changed.
const IGNORABLE: [u16; 4] = [1205, 1213, 1062, 1020];

/// InnoDB's dirty pages count as flushed at or below this.
const DIRTY_PAGES_DONE: u64 = 100;

const ROCKSDB_FLUSH: &str = "rocksdb_force_flush_memtable_now";
const ROCKSDB_COMPACT_L0: &str = "rocksdb_compact_lzero_now";
const ROCKSDB_FLUSH_AND_COMPACT_L0: &str = "rocksdb_force_flush_memtable_and_lzero_now";
/// The variables the post-write cleanup may set on MyRocks.
const ROCKSDB_CLEANUP: [&str; 3] = [
    ROCKSDB_FLUSH,
    ROCKSDB_COMPACT_L0,
    ROCKSDB_FLUSH_AND_COMPACT_L0,
];

/// Which of the MyRocks trigger variables to set to 1, in order, given the ones the
/// server has (`present`); None when it has none of them.
///
/// The MyRocks forks name the work differently. Facebook's has a separate L0
/// compaction, `rocksdb_compact_lzero_now`, run after the memtable flush. MariaDB's
/// (checked on 10.11's plugin) lacks it, and setting it is error 1193; its
/// `..._and_lzero_now` does both steps in one statement: flush every column family,
/// then compact its L0 files into L1. A build with only the flush still gets the flush.
fn rocksdb_cleanup_vars(present: &[&str]) -> Option<&'static [&'static str]> {
    let has = |var: &str| present.iter().any(|p| p.eq_ignore_ascii_case(var));
    if has(ROCKSDB_COMPACT_L0) && has(ROCKSDB_FLUSH) {
        Some(&[ROCKSDB_FLUSH, ROCKSDB_COMPACT_L0])
    } else if has(ROCKSDB_FLUSH_AND_COMPACT_L0) {
        Some(&[ROCKSDB_FLUSH_AND_COMPACT_L0])
    } else if has(ROCKSDB_FLUSH) {
        Some(&[ROCKSDB_FLUSH])
    } else {
        None
    }
}

pub struct MysqlDriver {
    socket: PathBuf,
    user: String,
    database: String,
    storage_engine: String,
    database_ready: AtomicBool,
    /// The connection that reads the cache counters (buffer_counters), opened at
    /// the first read: not one of the step's sessions.
    counters: Mutex<Option<MyClient>>,
}

impl MysqlDriver {
    pub fn new(socket: &str, user: &str, database: &str, storage_engine: &str) -> MysqlDriver {
        MysqlDriver {
            socket: socket.into(),
            user: user.into(),
            database: database.into(),
            storage_engine: storage_engine.into(),
            database_ready: AtomicBool::new(false),
            counters: Mutex::new(None),
        }
    }

    /// The status variables `wanted` (SHOW GLOBAL STATUS name, counter key) on `client`.
    fn status_counters(
        client: &mut MyClient,
        wanted: &[(&str, &str)],
    ) -> Result<BTreeMap<String, f64>, MyError> {
        let names: Vec<String> = wanted.iter().map(|(v, _)| format!("'{v}'")).collect();
        let rows = client.query_rows(&format!(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ({})",
            names.join(", ")
        ))?;
        let mut out = BTreeMap::new();
        for row in rows {
            if let [Some(name), Some(value)] = &row[..] {
                let key = wanted
                    .iter()
                    .find(|(v, _)| v.eq_ignore_ascii_case(name))
                    .map(|&(_, k)| k);
                if let (Some(key), Ok(v)) = (key, value.trim().parse::<f64>()) {
                    out.insert(key.to_string(), v);
                }
            }
        }
        Ok(out)
    }

    fn open(&self) -> Result<MyClient, MyError> {
        let mut client = MyClient::connect(&self.socket, &self.user, CONNECT_TIMEOUT)?;
        let db = self.database.replace('`', "``");
        if !self.database_ready.load(Relaxed) {
            client.query(&format!("CREATE DATABASE IF NOT EXISTS `{db}`"))?;
            self.database_ready.store(true, Relaxed);
        }
        client.init_db(&self.database)?;
        Ok(client)
    }
}

impl Driver for MysqlDriver {
    fn name(&self) -> &'static str {
        "mysql"
    }

    /// The cache counters of the tables' engine (engine_stats.rs): InnoDB's buffer
    /// pool, or on MyRocks its RocksDB's block cache.
    fn buffer_counters(&self, _sessions: &[u32]) -> DbResult<Option<BTreeMap<String, f64>>> {
        let (wanted, engine): (&[(&str, &str)], &str) =
            if self.storage_engine.eq_ignore_ascii_case("rocksdb") {
                (&MYROCKS_STATUS, "MyRocks")
            } else {
                (&INNODB_STATUS, "InnoDB")
            };
        let mut held = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        if held.is_none() {
            let client =
                MyClient::connect(&self.socket, &self.user, CONNECT_TIMEOUT).map_err(|e| {
                    DbError::fatal(format!(
                        "connect to read {engine}'s counters: {}",
                        e.message
                    ))
                })?;
            *held = Some(client);
        }
        let client = held.as_mut().expect("connected above");
        let found = Self::status_counters(client, wanted).map_err(|e| {
            DbError::fatal(format!("read {engine}'s cache counters: {}", e.message))
        })?;
        if found.len() != wanted.len() {
            let names: Vec<_> = wanted.iter().map(|(v, _)| *v).collect();
            return Err(DbError::fatal(format!(
                "SHOW GLOBAL STATUS has not all of {}: the server is not using {engine}",
                names.join(", ")
            )));
        }
        Ok(Some(found))
    }

    fn connect(&self) -> DbResult<Box<dyn Conn>> {
        let client = self.open().map_err(|e| {
            DbError::fatal(format!(
                "cannot connect to MySQL at {} as user {}, database {}: {}",
                self.socket.display(),
                self.user,
                self.database,
                e.message
            ))
        })?;
        Ok(Box::new(MyConn {
            client,
            dialect: &MYSQL,
            storage_engine: self.storage_engine.clone(),
            stmts: TableStmts::default(),
            micro: StmtCache::default(),
            loads: LoadCache::default(),
        }))
    }
}

pub(super) struct MyConn {
    pub(super) client: MyClient,
    /// The SQL this server reads.
    pub(super) dialect: &'static Dialect,
    pub(super) storage_engine: String,
    /// The Insert Benchmark statements prepared on this connection.
    stmts: TableStmts<Prepared>,
    /// Microbenchmark statements by table slot (see `mysql_micro`), and multi-row
    /// sbtest inserts by (table slot, rows).
    pub(super) micro: StmtCache<Prepared>,
    pub(super) loads: LoadCache<Prepared>,
}

pub(super) fn classify(e: MyError) -> DbError {
    match e.code {
        Some(code) if IGNORABLE.contains(&code) => DbError::ignorable(e.message),
        _ => DbError::fatal(e.message),
    }
}

impl MyConn {
    /// The statement prepared on this connection, preparing it on first use.
    fn prepared(&mut self, table: Table, key: StmtKey) -> DbResult<Prepared> {
        if let Some(&p) = self.stmts.get(table, key) {
            return Ok(p);
        }
        let p = self
            .client
            .prepare(&self.dialect.ib_sql(key, table.name))
            .map_err(classify)?;
        self.stmts.insert(key, p);
        Ok(p)
    }

    pub(super) fn batch(&mut self, sql: &str) -> DbResult<()> {
        self.client.query(sql).map(|_| ()).map_err(classify)
    }

    /// The dialect's statements `templates` on `table` in this connection's storage
    /// engine, one after another.
    pub(super) fn batches(&mut self, templates: &[&str], table: &str) -> DbResult<()> {
        for sql in self
            .dialect
            .fill_all(templates, table, &self.storage_engine)
        {
            self.batch(&sql)?;
        }
        Ok(())
    }

    /// The first row of a query, its columns parsed as integers (NULL as None).
    pub(super) fn query_ints(&mut self, sql: &str) -> DbResult<Vec<Option<i64>>> {
        let rows = self.client.query_rows(sql).map_err(classify)?;
        let row = rows
            .into_iter()
            .next()
            .ok_or_else(|| DbError::fatal(format!("no row from {sql}")))?;
        row.iter()
            .map(|v| match v {
                None => Ok(None),
                Some(s) => s
                    .trim()
                    .parse::<f64>()
                    .map(|f| Some(f as i64))
                    .map_err(|_| DbError::fatal(format!("{sql} returned {s}"))),
            })
            .collect()
    }

    fn is_rocksdb(&self) -> bool {
        self.storage_engine.eq_ignore_ascii_case("rocksdb")
    }

    /// Make MyRocks flush its memtables and compact L0 into L1, through the variables
    /// this build has (`rocksdb_cleanup_vars`).
    fn flush_rocksdb(&mut self) -> DbResult<()> {
        let names = ROCKSDB_CLEANUP.map(|v| format!("'{v}'")).join(", ");
        let rows = self
            .client
            .query_rows(&format!(
                "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})"
            ))
            .map_err(classify)?;
        let present: Vec<&str> = rows
            .iter()
            .filter_map(|row| row.first()?.as_deref())
            .collect();
        let vars = rocksdb_cleanup_vars(&present).ok_or_else(|| {
            DbError::fatal(format!(
                "this MyRocks build has none of {names}: cannot flush its memtables"
            ))
        })?;
        for var in vars {
            self.batch(&format!("SET GLOBAL {var} = 1"))?;
        }
        Ok(())
    }

    /// Make InnoDB write its dirty pages now: the flush target goes to 0 until the
    /// count settles, then back to what it was.
    fn flush_innodb(&mut self, timeout: Duration) -> DbResult<()> {
        let [pct, lwm] = sql::QueryInts::query_n(
            self,
            "SELECT @@global.innodb_max_dirty_pages_pct, @@global.innodb_max_dirty_pages_pct_lwm",
        )?;
        let (pct, lwm) = (pct.unwrap_or(90), lwm.unwrap_or(0));
        self.batch("SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0")?;
        self.batch("SET GLOBAL innodb_max_dirty_pages_pct = 0")?;
        let waited = self.wait_for_clean_pages(timeout);
        self.batch(&format!("SET GLOBAL innodb_max_dirty_pages_pct = {pct}"))?;
        self.batch(&format!(
            "SET GLOBAL innodb_max_dirty_pages_pct_lwm = {lwm}"
        ))?;
        waited
    }

    /// Poll the dirty page count until it is small, or has not fallen for 10 s.
    fn wait_for_clean_pages(&mut self, timeout: Duration) -> DbResult<()> {
        let start = Instant::now();
        let (mut lowest, mut lowest_at) = (u64::MAX, start);
        loop {
            let rows = self
                .client
                .query_rows("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
                .map_err(classify)?;
            let dirty = rows
                .first()
                .and_then(|r| r.get(1).cloned().flatten())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            let now = Instant::now();
            if dirty < lowest {
                (lowest, lowest_at) = (dirty, now);
            }
            if dirty <= DIRTY_PAGES_DONE || now - lowest_at > Duration::from_secs(10) {
                return Ok(());
            }
            if now - start > timeout {
                return Err(DbError::fatal(format!(
                    "InnoDB still had {dirty} dirty pages after {timeout:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Conn for MyConn {
    fn create_table(&mut self, table: Table) -> DbResult<()> {
        self.stmts.clear();
        self.batches(self.dialect.ib_create, table.name)
    }

    fn create_indexes(&mut self, table: Table) -> DbResult<()> {
        self.batches(self.dialect.ib_indexes, table.name)
    }

    fn insert(
        &mut self,
        table: Table,
        rows: &[InsertRow],
        want_last_id: bool,
    ) -> DbResult<Inserted> {
        if rows.len() * 6 > MAX_PARAMS {
            return Err(DbError::fatal(format!(
                "{} rows per insert exceed this driver's limit of {}",
                rows.len(),
                MAX_PARAMS / 6
            )));
        }
        let stmt = self.prepared(table, StmtKey::Insert(rows.len(), false))?;
        let r = self.client.execute(stmt, |p| {
            for r in rows {
                p.datetime(r.dateandtime);
                p.i64(r.cashregisterid.into());
                p.i64(r.customerid.into());
                p.i64(r.productid.into());
                p.i64(r.price.into());
                p.str(&r.data);
            }
        });
        let o = r.map_err(classify)?;
        // The OK packet carries the first id of a multi-row insert; they are consecutive.
        let last_id =
            match (want_last_id && o.rows > 0).then(|| o.last_insert_id.checked_add(o.rows - 1)) {
                Some(Some(id)) => Some(id as i64),
                Some(None) => {
                    return Err(DbError::fatal(format!(
                        "the server reported {} rows inserted from id {}, past the largest id",
                        o.rows, o.last_insert_id
                    )))
                }
                None => None,
            };
        Ok(Inserted {
            rows: o.rows,
            last_id,
        })
    }

    fn delete_oldest(&mut self, table: Table, n: u64) -> DbResult<u64> {
        let stmt = self.prepared(table, StmtKey::Delete)?;
        let r = self.client.execute(stmt, |p| p.i64(n as i64));
        r.map(|o| o.rows).map_err(classify)
    }

    fn range_query(&mut self, table: Table, index: RangeIndex, start: i32) -> DbResult<u64> {
        let stmt = self.prepared(table, StmtKey::Range(index))?;
        let r = self.client.execute(stmt, |p| p.i64(start.into()));
        r.map(|o| o.rows).map_err(classify)
    }

    fn point_query(&mut self, table: Table, ids: &[i64; 10]) -> DbResult<u64> {
        let stmt = self.prepared(table, StmtKey::Point)?;
        let r = self
            .client
            .execute(stmt, |p| ids.iter().for_each(|&id| p.i64(id)));
        r.map(|o| o.rows).map_err(classify)
    }

    fn count_rows(&mut self, table: Table) -> DbResult<u64> {
        sql::count_rows(self, table.name)
    }

    fn id_bounds(&mut self, table: Table) -> DbResult<Option<(i64, i64)>> {
        sql::id_bounds(self, table.name)
    }

    fn id_gaps(&mut self, table: Table) -> DbResult<Vec<(i64, i64)>> {
        let sql = self.dialect.fill(self.dialect.id_gaps, table.name, "");
        let rows = self.client.query_rows(&sql).map_err(classify)?;
        sql::gaps(&rows)
    }

    fn cleanup_table(&mut self, table: Table, _timeout: Duration) -> DbResult<()> {
        self.batches(self.dialect.cleanup_table, table.name)
    }

    fn cleanup_engine(&mut self, timeout: Duration) -> DbResult<()> {
        if self.is_rocksdb() {
            self.flush_rocksdb()
        } else {
            self.flush_innodb(timeout)
        }
    }

    fn micro(&mut self) -> Option<&mut dyn MicroConn> {
        Some(self)
    }
}

impl sql::QueryInts for MyConn {
    fn query_ints(&mut self, sql: &str) -> DbResult<Vec<Option<i64>>> {
        MyConn::query_ints(self, sql)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocksdb_cleanup_uses_what_the_build_has() {
        let facebook = [
            ROCKSDB_FLUSH,
            ROCKSDB_FLUSH_AND_COMPACT_L0,
            ROCKSDB_COMPACT_L0,
        ];
        assert_eq!(
            rocksdb_cleanup_vars(&facebook),
            Some(&[ROCKSDB_FLUSH, ROCKSDB_COMPACT_L0][..])
        );
        // MariaDB 10.11's plugin, as SHOW GLOBAL VARIABLES spells it
        let mariadb = [
            "rocksdb_force_flush_memtable_and_lzero_now",
            "rocksdb_force_flush_memtable_now",
        ];
        assert_eq!(
            rocksdb_cleanup_vars(&mariadb),
            Some(&[ROCKSDB_FLUSH_AND_COMPACT_L0][..])
        );
        assert_eq!(
            rocksdb_cleanup_vars(&["ROCKSDB_FORCE_FLUSH_MEMTABLE_NOW"]),
            Some(&[ROCKSDB_FLUSH][..])
        );
        assert_eq!(rocksdb_cleanup_vars(&[]), None);
    }
}
