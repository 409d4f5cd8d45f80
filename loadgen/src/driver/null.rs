//! No engine: every operation sleeps a scripted latency, and every Nth data operation
//! fails with an ignorable error. Tables are row counters with contiguous ids so the
//! workload's checks hold. For testing the scheduler and reports, never as an engine.

use super::kv::KvStore;
use super::micro::{Arg, MicroConn, SbRow, Stmt};
use super::null_bits::Bits;
use super::null_kv::NullKv;
use super::null_script::Script;
use super::{Conn, DbError, DbResult, Driver, InsertRow, Inserted, RangeIndex, Table};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Live ids of a table are `first..next`.
#[derive(Debug, Clone, Copy)]
struct Ids {
    first: i64,
    next: i64,
}

impl Ids {
    /// A table holding ids 1..=rows.
    fn holding(rows: u64) -> Ids {
        Ids {
            first: 1,
            next: 1 + rows as i64,
        }
    }
}

/// The ids of a microbenchmark table: a bitmap over the ids a step can reach (the
/// loaded rows, and room for as many inserted), an ordered set for any other id.
struct IdSet {
    dense: Bits,
    other: BTreeSet<i64>,
}

impl IdSet {
    /// Ids 1..=rows.
    fn holding(rows: u64) -> IdSet {
        let mut dense = Bits::new(2 * rows + 1024);
        dense.set_range(1, rows + 1);
        IdSet {
            dense,
            other: BTreeSet::new(),
        }
    }

    fn dense(&self, id: i64) -> Option<u64> {
        u64::try_from(id).ok().filter(|&i| i < self.dense.len())
    }

    fn contains(&self, id: i64) -> bool {
        match self.dense(id) {
            Some(i) => self.dense.get(i),
            None => self.other.contains(&id),
        }
    }

    /// True when the id was not there.
    fn insert(&mut self, id: i64) -> bool {
        match self.dense(id) {
            Some(i) => !self.dense.set(i, true),
            None => self.other.insert(id),
        }
    }

    /// True when the id was there.
    fn remove(&mut self, id: i64) -> bool {
        match self.dense(id) {
            Some(i) => self.dense.set(i, false),
            None => self.other.remove(&id),
        }
    }

    fn clear(&mut self) {
        self.dense.clear();
        self.other.clear();
    }

    /// Ids in `lo..=hi`.
    fn count(&self, lo: i64, hi: i64) -> u64 {
        if lo > hi {
            return 0;
        }
        let dense = match (u64::try_from(lo.max(0)), u64::try_from(hi)) {
            (Ok(l), Ok(h)) => self.dense.count(l, h),
            _ => 0,
        };
        dense + self.other.range(lo..=hi).count() as u64
    }

    fn last(&self) -> Option<i64> {
        let dense = self.dense.last().map(|i| i as i64);
        dense.max(self.other.last().copied())
    }
}

/// One family's tables by slot, shared by every connection, each behind its own lock.
struct Registry<T> {
    slots: Mutex<Vec<Option<Arc<Mutex<T>>>>>,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Registry {
            slots: Mutex::new(Vec::new()),
        }
    }
}

/// A connection's handles to the tables of one family it has used, by slot: the shared
/// registry is looked at once per table, so an operation locks its table alone.
struct Handles<T> {
    slots: Vec<Option<Arc<Mutex<T>>>>,
}

impl<T> Default for Handles<T> {
    fn default() -> Self {
        Handles { slots: Vec::new() }
    }
}

impl<T> Handles<T> {
    /// Table `slot`, made by `init` when no connection has used it yet.
    fn lock(
        &mut self,
        registry: &Registry<T>,
        slot: usize,
        init: impl FnOnce() -> T,
    ) -> MutexGuard<'_, T> {
        if self.slots.get(slot).is_none_or(Option::is_none) {
            let mut shared = registry.slots.lock().unwrap();
            if shared.len() <= slot {
                shared.resize_with(slot + 1, || None);
            }
            let table = shared[slot].get_or_insert_with(|| Arc::new(Mutex::new(init())));
            if self.slots.len() <= slot {
                self.slots.resize_with(slot + 1, || None);
            }
            self.slots[slot] = Some(table.clone());
        }
        let table = self.slots[slot].as_ref().expect("fetched above");
        table.lock().unwrap()
    }
}

/// The SQL side's tables, shared by every connection, and the script.
struct Shared {
    script: Arc<Script>,
    /// Insert Benchmark tables.
    tables: Registry<Ids>,
    /// Rows of the Insert Benchmark table in slot i when first seen, as if loaded
    /// earlier (insert.expected_rows; none without it).
    table_rows: Vec<u64>,
    /// Microbenchmark tables: their ids.
    sbtests: Registry<IdSet>,
    /// An sbtest table first seen holds ids 1..=sbtest_rows, as if loaded earlier.
    sbtest_rows: u64,
}

pub struct NullDriver {
    shared: Arc<Shared>,
    kv: NullKv,
}

impl NullDriver {
    /// Its key-value store holds `kv_keys` keys of `key_size` bytes (keys 0..kv_keys)
    /// from the start when `kv_prefilled`, and none otherwise.
    pub fn new(
        latency_us: u64,
        fail_every: u64,
        kv_keys: u64,
        kv_prefilled: bool,
        key_size: usize,
    ) -> NullDriver {
        let script = Arc::new(Script::new(latency_us, fail_every));
        NullDriver {
            kv: NullKv::new(script.clone(), kv_keys, kv_prefilled, key_size),
            shared: Arc::new(Shared {
                script,
                tables: Registry::default(),
                table_rows: Vec::new(),
                sbtests: Registry::default(),
                sbtest_rows: 0,
            }),
        }
    }

    fn shared_mut(&mut self) -> &mut Shared {
        Arc::get_mut(&mut self.shared).expect("configured before any connection")
    }

    /// Tables of the microbenchmarks start with `rows` rows, as a load step left them.
    pub fn with_sbtest_rows(mut self, rows: u64) -> NullDriver {
        self.shared_mut().sbtest_rows = rows;
        self
    }

    /// Insert Benchmark table pi<i+1> starts with `rows[i]` rows (ids 1..=rows[i]), as
    /// a load step left them; an empty list leaves every table empty.
    pub fn with_insert_rows(mut self, rows: Vec<u64>) -> NullDriver {
        self.shared_mut().table_rows = rows;
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
            tables: Handles::default(),
            sbtests: Handles::default(),
        }))
    }

    fn kv(&self) -> Option<&dyn KvStore> {
        Some(&self.kv)
    }
}

struct NullConn {
    shared: Arc<Shared>,
    tables: Handles<Ids>,
    sbtests: Handles<IdSet>,
}

impl NullConn {
    fn data_op(&self) -> DbResult<()> {
        self.shared.script.data_op()
    }

    fn pause(&self) {
        self.shared.script.pause()
    }

    fn with_table<T>(&mut self, table: Table, f: impl FnOnce(&mut Ids) -> T) -> T {
        let rows = self.shared.table_rows.get(table.slot).copied();
        let init = || Ids::holding(rows.unwrap_or(0));
        f(&mut self.tables.lock(&self.shared.tables, table.slot, init))
    }
}

impl Conn for NullConn {
    fn create_table(&mut self, table: Table) -> DbResult<()> {
        self.pause();
        self.with_table(table, |t| *t = Ids::holding(0));
        Ok(())
    }

    fn create_indexes(&mut self, _table: Table) -> DbResult<()> {
        self.pause();
        Ok(())
    }

    fn insert(
        &mut self,
        table: Table,
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

    fn delete_oldest(&mut self, table: Table, n: u64) -> DbResult<u64> {
        self.data_op()?;
        Ok(self.with_table(table, |t| {
            let deleted = (n as i64).min(t.next - t.first);
            t.first += deleted;
            deleted as u64
        }))
    }

    fn range_query(&mut self, table: Table, _index: RangeIndex, _start: i32) -> DbResult<u64> {
        self.data_op()?;
        Ok(self.with_table(table, |t| (t.next - t.first).min(10) as u64))
    }

    fn point_query(&mut self, table: Table, ids: &[i64; 10]) -> DbResult<u64> {
        self.data_op()?;
        Ok(self.with_table(table, |t| {
            ids.iter()
                .filter(|&&id| id >= t.first && id < t.next)
                .count() as u64
        }))
    }

    fn count_rows(&mut self, table: Table) -> DbResult<u64> {
        Ok(self.with_table(table, |t| (t.next - t.first) as u64))
    }

    fn id_bounds(&mut self, table: Table) -> DbResult<Option<(i64, i64)>> {
        Ok(self.with_table(table, |t| {
            (t.next > t.first).then_some((t.first, t.next - 1))
        }))
    }

    fn id_gaps(&mut self, _table: Table) -> DbResult<Vec<(i64, i64)>> {
        Ok(Vec::new())
    }

    fn cleanup_table(&mut self, _table: Table, _timeout: Duration) -> DbResult<()> {
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
    fn with_ids<T>(&mut self, table: Table, f: impl FnOnce(&mut IdSet) -> T) -> T {
        let rows = self.shared.sbtest_rows;
        let init = || IdSet::holding(rows);
        f(&mut self.sbtests.lock(&self.shared.sbtests, table.slot, init))
    }
}

fn int(args: &[Arg], i: usize) -> i64 {
    match args.get(i) {
        Some(Arg::Int(v)) => *v,
        _ => 0,
    }
}

/// Rows each statement would return or change, given the table's ids.
fn null_exec(ids: &mut IdSet, stmt: Stmt, args: &[Arg]) -> DbResult<u64> {
    let listed = || {
        args.iter()
            .filter(|a| matches!(a, Arg::Int(v) if ids.contains(*v)))
            .count() as u64
    };
    let range = |ids: &IdSet| ids.count(int(args, 0), int(args, 1));
    Ok(match stmt {
        Stmt::PointSelect | Stmt::UpdateIndex => ids.contains(int(args, 0)) as u64,
        Stmt::UpdateNonIndex => ids.contains(int(args, 1)) as u64,
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
        Stmt::DeleteOne => ids.remove(int(args, 0)) as u64,
        Stmt::InsertOne => {
            if !ids.insert(int(args, 0)) {
                return Err(DbError::ignorable("null driver: duplicate key"));
            }
            1
        }
    })
}

impl MicroConn for NullConn {
    fn create_sbtest(&mut self, table: Table) -> DbResult<()> {
        self.pause();
        self.with_ids(table, |ids| ids.clear());
        Ok(())
    }

    fn insert_sbtest(&mut self, table: Table, rows: &[SbRow]) -> DbResult<u64> {
        self.data_op()?;
        self.with_ids(table, |ids| {
            for r in rows {
                ids.insert(r.id);
            }
        });
        Ok(rows.len() as u64)
    }

    fn create_k_index(&mut self, _table: Table, _index: &str) -> DbResult<()> {
        self.pause();
        Ok(())
    }

    fn exec(&mut self, table: Table, stmt: Stmt, args: &[Arg]) -> DbResult<u64> {
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

    fn count_ids(&mut self, table: Table, lo: i64, hi: i64) -> DbResult<u64> {
        Ok(self.with_ids(table, |ids| ids.count(lo, hi)))
    }

    fn max_id(&mut self, table: Table) -> DbResult<i64> {
        Ok(self.with_ids(table, |ids| ids.last().unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn id_sets_behave_as_ordered_sets(
            rows in 0u64..100,
            ops in proptest::collection::vec((0u8..3, -50i64..400), 0..200),
            lo in -60i64..420,
            hi in -60i64..420,
        ) {
            let mut ids = IdSet::holding(rows);
            let mut model: BTreeSet<i64> = (1..=rows as i64).collect();
            for (op, id) in ops {
                match op {
                    0 => prop_assert_eq!(ids.insert(id), model.insert(id)),
                    1 => prop_assert_eq!(ids.remove(id), model.remove(&id)),
                    _ => prop_assert_eq!(ids.contains(id), model.contains(&id)),
                }
            }
            let want = if lo <= hi { model.range(lo..=hi).count() as u64 } else { 0 };
            prop_assert_eq!(ids.count(lo, hi), want);
            prop_assert_eq!(ids.count(i64::MIN, i64::MAX), model.len() as u64);
            prop_assert_eq!(ids.last(), model.last().copied());
        }
    }
}
