//! The engine boundary. A driver is one file implementing `Driver` and `Conn`, registered
//! by name in `open`; workloads speak only to these traits, and the runner times every
//! call, so drivers never time themselves.

mod dialect;
pub mod kv;
pub mod micro;
mod mypacket;
mod mysql;
mod mysql_micro;
mod mywire;
mod null;
mod null_bits;
mod null_kv;
mod null_script;
mod pgwire;
mod postgres;
mod postgres_micro;
mod rocksdb;
mod rocksdb_api;
mod rocksdb_db;
mod rocksdb_session;
mod rocksdb_stats;
mod sockwait;
mod sql;
#[cfg(test)]
mod wire_props;

use crate::kvspec::{self, KvStep};
use crate::micro_spec;
use crate::spec::{EngineSpec, StepSpec};
use crate::workload_spec::Workload;
use kv::KvStore;
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

/// How an error affects the step (sysbench's classes): ignorable errors are counted by
/// kind and the loop goes on; fatal ones end the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Ignorable,
    Fatal,
}

#[derive(Debug, Clone)]
pub struct DbError {
    pub class: ErrorClass,
    pub message: String,
}

impl DbError {
    pub fn fatal(message: impl Into<String>) -> DbError {
        DbError {
            class: ErrorClass::Fatal,
            message: message.into(),
        }
    }

    pub fn ignorable(message: impl Into<String>) -> DbError {
        DbError {
            class: ErrorClass::Ignorable,
            message: message.into(),
        }
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DbError {}

pub type DbResult<T> = Result<T, DbError>;

/// One row of an Insert Benchmark table, without its generated primary key.
#[derive(Debug, Clone)]
pub struct InsertRow {
    pub dateandtime: SystemTime,
    pub cashregisterid: i32,
    pub customerid: i32,
    pub productid: i32,
    pub price: i32,
    pub data: String,
}

/// What an insert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inserted {
    pub rows: u64,
    /// The largest generated primary key, when asked for.
    pub last_id: Option<i64>,
}

/// The three covering secondary indexes and the range query each one serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RangeIndex {
    /// marketsegment(productid, customerid, price)
    MarketSegment,
    /// registersegment(cashregisterid, customerid, price)
    RegisterSegment,
    /// pdc(price, dateandtime, customerid)
    Pdc,
}

impl RangeIndex {
    pub const ALL: [RangeIndex; 3] = [
        RangeIndex::MarketSegment,
        RangeIndex::RegisterSegment,
        RangeIndex::Pdc,
    ];
}

/// Which table an operation is on: `slot` is a small dense number, unique within the
/// table's family (the Insert Benchmark's `pi<N>` and the microbenchmarks' `sbtest<N>`
/// are both slot N-1), by which drivers find the statements they prepared for it with
/// an integer compare; `name` is its SQL name, read only when something is prepared.
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    pub slot: usize,
    pub name: &'a str,
}

/// A way to reach one engine. SQL engines give connections; key-value engines give
/// their store; the null driver gives both.
pub trait Driver: Send + Sync {
    fn name(&self) -> &'static str;
    fn connect(&self) -> DbResult<Box<dyn Conn>> {
        Err(DbError::fatal(format!(
            "driver {} has no SQL connections",
            self.name()
        )))
    }
    /// The key-value store, for drivers that embed one.
    fn kv(&self) -> Option<&dyn KvStore> {
        None
    }
    /// Optional features found in this engine build, for the start event; None when
    /// the driver has no such notion.
    fn capabilities(&self) -> Option<Vec<&'static str>> {
        None
    }
    /// A SQL engine's buffer counters now (engine_stats.rs names them), for the step's
    /// state; `sessions` are the server processes serving the step's connections. None
    /// when the engine has none. An error is the step's.
    fn buffer_counters(&self, _sessions: &[u32]) -> DbResult<Option<BTreeMap<String, f64>>> {
        Ok(None)
    }
    /// Whether reading the buffer counters leaves the server alone (a file of the
    /// kernel's): a profiler's window then reads them inside its edges, after the
    /// caller's open and before its close, where nothing the caller does at an edge is
    /// counted. Else (a statement the server runs) outside them, where the statement is
    /// not counted in the profiler's window.
    fn counters_read_inside(&self) -> bool {
        false
    }
}

/// One connection (session) to the engine, on Insert Benchmark tables.
pub trait Conn: Send {
    /// Drop the table if it exists and create it empty, without secondary indexes.
    fn create_table(&mut self, table: Table) -> DbResult<()>;
    /// Create the three secondary indexes.
    fn create_indexes(&mut self, table: Table) -> DbResult<()>;
    /// Insert the rows in one statement and commit; with `want_last_id`, also report
    /// the largest primary key it generated.
    fn insert(
        &mut self,
        table: Table,
        rows: &[InsertRow],
        want_last_id: bool,
    ) -> DbResult<Inserted>;
    /// Delete the `n` rows with the smallest primary keys and commit; returns rows deleted.
    fn delete_oldest(&mut self, table: Table, n: u64) -> DbResult<u64>;
    /// The index's covering query from `start`, 10 rows at most; returns rows read.
    fn range_query(&mut self, table: Table, index: RangeIndex, start: i32) -> DbResult<u64>;
    /// Fetch rows by primary key; returns rows found.
    fn point_query(&mut self, table: Table, ids: &[i64; 10]) -> DbResult<u64>;
    fn count_rows(&mut self, table: Table) -> DbResult<u64>;
    /// Smallest and largest primary key, None when the table is empty.
    fn id_bounds(&mut self, table: Table) -> DbResult<Option<(i64, i64)>>;
    /// Ranges of primary keys missing between the smallest and largest, inclusive
    /// (auto-increment values consumed by failed inserts or skipped after a crash).
    /// Slow (a full index scan): only called when the row count says there are gaps.
    fn id_gaps(&mut self, table: Table) -> DbResult<Vec<(i64, i64)>>;
    /// The engine's post-write cleanup of one table (vacuum, flush, compact).
    fn cleanup_table(&mut self, table: Table, timeout: Duration) -> DbResult<()>;
    /// Cleanup once for the whole engine after every table (checkpoint).
    fn cleanup_engine(&mut self, timeout: Duration) -> DbResult<()>;
    /// The microbenchmarks' statements, for drivers that offer them.
    fn micro(&mut self) -> Option<&mut dyn micro::MicroConn> {
        None
    }
    /// The pid of the server process serving this connection, where the engine runs a
    /// process per session (PostgreSQL): a profiler then tells the sessions' work from
    /// the server's background processes.
    fn session_pid(&self) -> Option<u32> {
        None
    }
}

/// The registry: the driver named by the spec's `engine.driver`. An embedded engine is
/// loaded and opened here, before the step starts.
pub fn open(spec: &StepSpec) -> anyhow::Result<Box<dyn Driver>> {
    Ok(match &spec.engine {
        EngineSpec::Postgres {
            socket_dir,
            port,
            user,
            database,
        } => Box::new(postgres::PostgresDriver::new(
            socket_dir, *port, user, database,
        )),
        EngineSpec::Null {
            latency_us,
            fail_every,
        } => {
            let (latency, fail) = (*latency_us, *fail_every);
            // What the null engine holds before the step: the workload's own sizes, the
            // defaults' for the others.
            let (mut kv_keys, mut key_size) = (0, kvspec::default_key_size());
            let (mut prefilled, mut sbtest_rows) = (true, micro_spec::default_rows());
            let mut insert_rows = Vec::new();
            match &spec.workload {
                Workload::Kv(kv) => {
                    (kv_keys, key_size) = (kv.keys(), kv.key_size);
                    prefilled = kv.step != KvStep::Fillseq;
                }
                Workload::Micro(m) => sbtest_rows = m.rows,
                Workload::Insert(i) => insert_rows = i.expected_rows.clone().unwrap_or_default(),
            }
            Box::new(
                null::NullDriver::new(latency, fail, kv_keys, prefilled, key_size)
                    .with_sbtest_rows(sbtest_rows)
                    .with_insert_rows(insert_rows),
            )
        }
        EngineSpec::Mysql {
            socket,
            user,
            database,
            storage_engine,
        } => Box::new(mysql::MysqlDriver::new(
            socket,
            user,
            database,
            storage_engine,
        )),
        EngineSpec::Rocksdb {
            library,
            version,
            db_path,
            options,
        } => Box::new(rocksdb::RocksDriver::open(
            library,
            version,
            db_path,
            options,
            matches!(&spec.workload, Workload::Kv(kv) if kv.step == KvStep::Fillseq),
        )?),
    })
}
