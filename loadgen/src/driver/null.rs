//! No engine: every operation sleeps a scripted latency, and every Nth data operation
//! fails with an ignorable error. Tables are row counters with contiguous ids so the
//! workload's checks hold. For testing the scheduler and reports, never as an engine.

use super::kv::KvStore;
use super::null_kv::NullKv;
use super::{Conn, DbError, DbResult, Driver, InsertRow, Inserted, RangeIndex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
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

/// The scripted latency and failures, shared by the SQL and the key-value sides.
pub struct Shared {
    latency: Duration,
    fail_every: u64,
    ops: AtomicU64,
    tables: Mutex<HashMap<String, Table>>,
}

impl Shared {
    pub fn new(latency_us: u64, fail_every: u64) -> Shared {
        Shared {
            latency: Duration::from_micros(latency_us),
            fail_every,
            ops: AtomicU64::new(0),
            tables: Mutex::new(HashMap::new()),
        }
    }

    /// Sleep the scripted latency; fail if this is the Nth data operation.
    pub fn data_op(&self) -> DbResult<()> {
        self.pause();
        let n = self.ops.fetch_add(1, Relaxed) + 1;
        if self.fail_every > 0 && n.is_multiple_of(self.fail_every) {
            return Err(DbError::ignorable(format!(
                "null driver: injected error (operation {n})"
            )));
        }
        Ok(())
    }

    pub fn pause(&self) {
        if !self.latency.is_zero() {
            std::thread::sleep(self.latency);
        }
    }
}

pub struct NullDriver {
    shared: Arc<Shared>,
    kv: NullKv,
}

impl NullDriver {
    /// `kv_prefill` keys of `key_size` bytes are in its key-value store from the start.
    pub fn new(latency_us: u64, fail_every: u64, kv_prefill: u64, key_size: usize) -> NullDriver {
        let shared = Arc::new(Shared::new(latency_us, fail_every));
        NullDriver {
            kv: NullKv::new(shared.clone(), kv_prefill, key_size),
            shared,
        }
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
        self.shared.data_op()
    }

    fn pause(&self) {
        self.shared.pause()
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
}
