//! No engine: every operation sleeps a scripted latency, and every Nth data operation
//! fails with an ignorable error. Tables are row counters with contiguous ids so the
//! workload's checks hold. For testing the scheduler and reports, never as an engine.

use super::kv::KvStore;
use super::micro::{Arg, MicroConn, SbRow, Stmt, Table as SbTable};
use super::null_kv::NullKv;
use super::null_script::Script;
use super::{Conn, DbError, DbResult, Driver, InsertRow, Inserted, RangeIndex};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Live ids of a table are `first..next`.
#[derive(Debug, Clone, Copy)]
struct Table {
    first: i64,
    next: i64,
}

impl Default for Table {
    fn default() -> Self {
        Table { first: 1, next: 1 }
    }
}

/// The SQL side's tables, shared by every connection, and the script.
struct Shared {
    script: Arc<Script>,
    tables: Mutex<HashMap<String, Table>>,
    /// Microbenchmark tables: their ids.
    sbtests: Mutex<HashMap<String, BTreeSet<i64>>>,
    /// An sbtest table first seen holds ids 1..=sbtest_rows, as if loaded earlier.
    sbtest_rows: AtomicI64,
}

pub struct NullDriver {
    shared: Arc<Shared>,
    kv: NullKv,
}

impl NullDriver {
    /// `kv_prefill` keys of `key_size` bytes are in its key-value store from the start.
    pub fn new(latency_us: u64, fail_every: u64, kv_prefill: u64, key_size: usize) -> NullDriver {
        let script = Arc::new(Script::new(latency_us, fail_every));
        NullDriver {
            kv: NullKv::new(script.clone(), kv_prefill, key_size),
            shared: Arc::new(Shared {
                script,
                tables: Mutex::new(HashMap::new()),
                sbtests: Mutex::new(HashMap::new()),
                sbtest_rows: AtomicI64::new(0),
            }),
        }
    }
}

impl NullDriver {
    /// Tables of the microbenchmarks start with `rows` rows, as a load step left them.
    pub fn with_sbtest_rows(self, rows: u64) -> NullDriver {
        self.shared.sbtest_rows.store(rows as i64, Relaxed);
        self
    }
}

impl Driver for NullDriver {
    fn name(&self) -> &'static str {
        "null"
    }

    fn connect(&self) -> DbResult<Box<dyn Conn>> {
        Ok(Box::new(NullConn {
            shared: self.shared.clone(),
        }))
    }

    fn kv(&self) -> Option<&dyn KvStore> {
        Some(&self.kv)
    }
}

struct NullConn {
    shared: Arc<Shared>,
}

impl NullConn {
    fn data_op(&self) -> DbResult<()> {
        self.shared.script.data_op()
    }

    fn pause(&self) {
        self.shared.script.pause()
    }

    fn with_table<T>(&self, table: &str, f: impl FnOnce(&mut Table) -> T) -> T {
        let mut tables = self.shared.tables.lock().unwrap();
        f(tables.entry(table.to_string()).or_default())
    }
}

impl Conn for NullConn {
    fn create_table(&mut self, table: &str) -> DbResult<()> {
        self.pause();
        self.with_table(table, |t| *t = Table::default());
        Ok(())
    }

    fn create_indexes(&mut self, _table: &str) -> DbResult<()> {
        self.pause();
        Ok(())
    }

    fn insert(
        &mut self,
        table: &str,
        rows: &[InsertRow],
        want_last_id: bool,
    ) -> DbResult<Inserted> {
        self.data_op()?;
        let next = self.with_table(table, |t| {
            t.next += rows.len() as i64;
            t.next
        });
        Ok(Inserted {
            rows: rows.len() as u64,
            last_id: want_last_id.then_some(next - 1),
        })
    }

    fn delete_oldest(&mut self, table: &str, n: u64) -> DbResult<u64> {
        self.data_op()?;
        Ok(self.with_table(table, |t| {
            let deleted = (n as i64).min(t.next - t.first);
            t.first += deleted;
            deleted as u64
        }))
    }

    fn range_query(&mut self, table: &str, _index: RangeIndex, _start: i32) -> DbResult<u64> {
        self.data_op()?;
        Ok(self.with_table(table, |t| (t.next - t.first).min(10) as u64))
    }

    fn point_query(&mut self, table: &str, ids: &[i64; 10]) -> DbResult<u64> {
        self.data_op()?;
        Ok(self.with_table(table, |t| {
            ids.iter()
                .filter(|&&id| id >= t.first && id < t.next)
                .count() as u64
        }))
    }

    fn count_rows(&mut self, table: &str) -> DbResult<u64> {
        Ok(self.with_table(table, |t| (t.next - t.first) as u64))
    }

    fn id_bounds(&mut self, table: &str) -> DbResult<Option<(i64, i64)>> {
        Ok(self.with_table(table, |t| {
            (t.next > t.first).then_some((t.first, t.next - 1))
        }))
    }

    fn id_gaps(&mut self, _table: &str) -> DbResult<Vec<(i64, i64)>> {
        Ok(Vec::new())
    }

    fn cleanup_table(&mut self, _table: &str, _timeout: Duration) -> DbResult<()> {
        self.pause();
        Ok(())
    }

    fn cleanup_engine(&mut self, _timeout: Duration) -> DbResult<()> {
        self.pause();
        Ok(())
    }

    fn micro(&mut self) -> Option<&mut dyn MicroConn> {
        Some(self)
    }
}

impl NullConn {
    fn with_ids<T>(&self, table: SbTable, f: impl FnOnce(&mut BTreeSet<i64>) -> T) -> T {
        let mut tables = self.shared.sbtests.lock().unwrap();
        let rows = self.shared.sbtest_rows.load(Relaxed);
        f(tables
            .entry(table.name.to_string())
            .or_insert_with(|| (1..=rows).collect()))
    }
}

fn int(args: &[Arg], i: usize) -> i64 {
    match args.get(i) {
        Some(Arg::Int(v)) => *v,
        _ => 0,
    }
}

/// Rows each statement would return or change, given the table's ids.
fn null_exec(ids: &mut BTreeSet<i64>, stmt: Stmt, args: &[Arg]) -> DbResult<u64> {
    let listed = || {
        args.iter()
            .filter(|a| matches!(a, Arg::Int(v) if ids.contains(v)))
            .count() as u64
    };
    let range = |ids: &BTreeSet<i64>| ids.range(int(args, 0)..=int(args, 1)).count() as u64;
    Ok(match stmt {
        Stmt::PointSelect | Stmt::UpdateIndex => ids.contains(&int(args, 0)) as u64,
        Stmt::UpdateNonIndex => ids.contains(&int(args, 1)) as u64,
        Stmt::PointsAll | Stmt::PointsCoveredPk | Stmt::PointsNotCoveredPk | Stmt::UpdateInList => {
            listed()
        }
        Stmt::PointsCoveredSi | Stmt::PointsNotCoveredSi => args.len() as u64,
        Stmt::RangeCoveredPk
        | Stmt::RangeNotCoveredPk
        | Stmt::SimpleRange
        | Stmt::OrderRange
        | Stmt::DistinctRange => range(ids),
        Stmt::RangeCoveredSi | Stmt::RangeNotCoveredSi => (int(args, 1) - int(args, 0) + 1) as u64,
        Stmt::SumRange | Stmt::CountRange => 1,
        Stmt::Scan => 0,
        Stmt::DeleteOne => ids.remove(&int(args, 0)) as u64,
        Stmt::InsertOne => {
            if !ids.insert(int(args, 0)) {
                return Err(DbError::ignorable("null driver: duplicate key"));
            }
            1
        }
    })
}

impl MicroConn for NullConn {
    fn create_sbtest(&mut self, table: SbTable) -> DbResult<()> {
        self.pause();
        self.with_ids(table, |ids| ids.clear());
        Ok(())
    }

    fn insert_sbtest(&mut self, table: SbTable, rows: &[SbRow]) -> DbResult<u64> {
        self.data_op()?;
        self.with_ids(table, |ids| ids.extend(rows.iter().map(|r| r.id)));
        Ok(rows.len() as u64)
    }

    fn create_k_index(&mut self, _table: SbTable, _index: &str) -> DbResult<()> {
        self.pause();
        Ok(())
    }

    fn exec(&mut self, table: SbTable, stmt: Stmt, args: &[Arg]) -> DbResult<u64> {
        self.data_op()?;
        self.with_ids(table, |ids| null_exec(ids, stmt, args))
    }

    fn begin(&mut self) -> DbResult<()> {
        Ok(())
    }

    fn commit(&mut self) -> DbResult<()> {
        Ok(())
    }

    fn rollback(&mut self) -> DbResult<()> {
        Ok(())
    }

    fn count_ids(&mut self, table: SbTable, lo: i64, hi: i64) -> DbResult<u64> {
        Ok(self.with_ids(table, |ids| ids.range(lo..=hi).count() as u64))
    }

    fn max_id(&mut self, table: SbTable) -> DbResult<i64> {
        Ok(self.with_ids(table, |ids| ids.last().copied().unwrap_or(0)))
    }
}
