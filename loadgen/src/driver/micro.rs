//! The microbenchmark side of a SQL connection (docs/lab-file.md, The micro benchmark): sysbench's
//! statements on `sbtest<N>` tables, named by what they do so the workload never writes
//! SQL. The statement text is shared by the SQL drivers; only placeholders and DDL
//! differ, and those stay in each driver.

use super::DbResult;

/// Parameters per IN-list, as in sysbench's in-list tests.
pub const IN_LIST: usize = 10;

/// One of the microbenchmark's statements. `?` parameters, in order, are given to
/// `MicroConn::exec` as `Arg`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// SELECT c WHERE id = ?
    PointSelect,
    /// SELECT id, k, c, pad WHERE id IN (10 ids)
    PointsAll,
    /// SELECT id WHERE id IN (10 ids): the PK alone answers it
    PointsCoveredPk,
    /// SELECT id, c WHERE id IN (10 ids)
    PointsNotCoveredPk,
    /// SELECT k WHERE k IN (10 values): the k index alone answers it
    PointsCoveredSi,
    /// SELECT k, c WHERE k IN (10 values)
    PointsNotCoveredSi,
    /// SELECT id WHERE id BETWEEN ? AND ?
    RangeCoveredPk,
    /// SELECT id, c WHERE id BETWEEN ? AND ?
    RangeNotCoveredPk,
    /// SELECT k WHERE k BETWEEN ? AND ?
    RangeCoveredSi,
    /// SELECT k, c WHERE k BETWEEN ? AND ?
    RangeNotCoveredSi,
    /// sysbench's simple range: SELECT c WHERE id BETWEEN ? AND ?
    SimpleRange,
    /// SELECT SUM(k) WHERE id BETWEEN ? AND ?
    SumRange,
    /// SELECT c WHERE id BETWEEN ? AND ? ORDER BY c
    OrderRange,
    /// SELECT DISTINCT c WHERE id BETWEEN ? AND ? ORDER BY c
    DistinctRange,
    /// SELECT COUNT(*) WHERE id BETWEEN ? AND ?
    CountRange,
    /// A full scan that returns nothing: WHERE LENGTH(c) < 0
    Scan,
    /// UPDATE SET k = k + 1 WHERE id = ?
    UpdateIndex,
    /// UPDATE SET c = ? WHERE id = ?
    UpdateNonIndex,
    /// UPDATE SET k = k + 1 WHERE id IN (10 ids)
    UpdateInList,
    /// DELETE WHERE id = ?
    DeleteOne,
    /// INSERT (id, k, c, pad) VALUES (?, ?, ?, ?)
    InsertOne,
}

impl Stmt {
    pub const COUNT: usize = 21;

    /// SQL on `table` with parameter i (0-based) written by `ph(i)`.
    pub fn sql(self, table: &str, ph: impl Fn(usize) -> String) -> String {
        let list = |from: usize| {
            (from..from + IN_LIST)
                .map(&ph)
                .collect::<Vec<_>>()
                .join(",")
        };
        let between = |col: &str| format!("{col} BETWEEN {} AND {}", ph(0), ph(1));
        let select = |cols: &str, cond: String| format!("SELECT {cols} FROM {table} WHERE {cond}");
        match self {
            Stmt::PointSelect => select("c", format!("id = {}", ph(0))),
            Stmt::PointsAll => select("id, k, c, pad", format!("id IN ({})", list(0))),
            Stmt::PointsCoveredPk => select("id", format!("id IN ({})", list(0))),
            Stmt::PointsNotCoveredPk => select("id, c", format!("id IN ({})", list(0))),
            Stmt::PointsCoveredSi => select("k", format!("k IN ({})", list(0))),
            Stmt::PointsNotCoveredSi => select("k, c", format!("k IN ({})", list(0))),
            Stmt::RangeCoveredPk => select("id", between("id")),
            Stmt::RangeNotCoveredPk => select("id, c", between("id")),
            Stmt::RangeCoveredSi => select("k", between("k")),
            Stmt::RangeNotCoveredSi => select("k, c", between("k")),
            Stmt::SimpleRange => select("c", between("id")),
            Stmt::SumRange => select("SUM(k)", between("id")),
            Stmt::OrderRange => select("c", between("id") + " ORDER BY c"),
            Stmt::DistinctRange => select("DISTINCT c", between("id") + " ORDER BY c"),
            Stmt::CountRange => select("COUNT(*)", between("id")),
            Stmt::Scan => select("id, k, c, pad", "LENGTH(c) < 0".into()),
            Stmt::UpdateIndex => format!("UPDATE {table} SET k = k + 1 WHERE id = {}", ph(0)),
            Stmt::UpdateNonIndex => {
                format!("UPDATE {table} SET c = {} WHERE id = {}", ph(0), ph(1))
            }
            Stmt::UpdateInList => {
                format!("UPDATE {table} SET k = k + 1 WHERE id IN ({})", list(0))
            }
            Stmt::DeleteOne => format!("DELETE FROM {table} WHERE id = {}", ph(0)),
            Stmt::InsertOne => format!(
                "INSERT INTO {table} (id, k, c, pad) VALUES ({}, {}, {}, {})",
                ph(0),
                ph(1),
                ph(2),
                ph(3)
            ),
        }
    }
}

/// A statement parameter.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Int(i64),
    Str(&'a str),
}

/// One row of an sbtest table.
#[derive(Debug, Clone)]
pub struct SbRow {
    pub id: i64,
    pub k: i64,
    pub c: String,
    pub pad: String,
}

/// Which sbtest table: `sbtest<N>` is slot N-1.
pub use super::Table;

/// What a SQL connection offers the microbenchmarks. Statements run in autocommit
/// unless between `begin` and `commit`/`rollback`.
pub trait MicroConn {
    /// Drop the table if it exists and create it empty, without the k index.
    fn create_sbtest(&mut self, table: Table) -> DbResult<()>;
    /// Insert the rows in one statement; returns rows inserted.
    fn insert_sbtest(&mut self, table: Table, rows: &[SbRow]) -> DbResult<u64>;
    /// Create the secondary index `k_<N>` on k.
    fn create_k_index(&mut self, table: Table, index: &str) -> DbResult<()>;
    /// Run a prepared statement; returns rows returned (queries) or affected (writes).
    fn exec(&mut self, table: Table, stmt: Stmt, args: &[Arg]) -> DbResult<u64>;
    fn begin(&mut self) -> DbResult<()>;
    fn commit(&mut self) -> DbResult<()>;
    fn rollback(&mut self) -> DbResult<()>;
    /// Rows with `lo <= id <= hi`.
    fn count_ids(&mut self, table: Table, lo: i64, hi: i64) -> DbResult<u64>;
    /// The largest id, 0 for an empty table.
    fn max_id(&mut self, table: Table) -> DbResult<i64>;
}

/// Per-connection prepared statements by (table slot, statement): a dense vector, so
/// the hot path looks a statement up without hashing.
pub struct StmtCache<T> {
    slots: Vec<Option<T>>,
}

impl<T> Default for StmtCache<T> {
    fn default() -> Self {
        StmtCache { slots: Vec::new() }
    }
}

impl<T> StmtCache<T> {
    fn index(table: Table, stmt: Stmt) -> usize {
        table.slot * Stmt::COUNT + stmt as usize
    }

    pub fn get(&self, table: Table, stmt: Stmt) -> Option<&T> {
        self.slots.get(Self::index(table, stmt))?.as_ref()
    }

    pub fn insert(&mut self, table: Table, stmt: Stmt, v: T) {
        let i = Self::index(table, stmt);
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(v);
    }

    pub fn clear_table(&mut self, table: Table) {
        let start = table.slot * Stmt::COUNT;
        for s in self.slots.iter_mut().skip(start).take(Stmt::COUNT) {
            *s = None;
        }
    }
}

/// Per-connection multi-row insert statements of the load step by (table slot, rows per
/// statement): a vector per slot holding the one or two batch sizes a load uses, so a
/// batch finds its statement without hashing.
pub struct LoadCache<T> {
    slots: Vec<Vec<(usize, T)>>,
}

impl<T> Default for LoadCache<T> {
    fn default() -> Self {
        LoadCache { slots: Vec::new() }
    }
}

impl<T> LoadCache<T> {
    pub fn get(&self, table: Table, rows: usize) -> Option<&T> {
        let by_rows = self.slots.get(table.slot)?;
        by_rows.iter().find(|(n, _)| *n == rows).map(|(_, v)| v)
    }

    pub fn insert(&mut self, table: Table, rows: usize, v: T) {
        if self.slots.len() <= table.slot {
            self.slots.resize_with(table.slot + 1, Vec::new);
        }
        self.slots[table.slot].push((rows, v));
    }

    pub fn clear_table(&mut self, table: Table) {
        if let Some(by_rows) = self.slots.get_mut(table.slot) {
            by_rows.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_number_their_parameters() {
        let pg = |i: usize| format!("${}", i + 1);
        assert_eq!(
            Stmt::PointSelect.sql("sbtest1", pg),
            "SELECT c FROM sbtest1 WHERE id = $1"
        );
        assert_eq!(
            Stmt::UpdateNonIndex.sql("t", |_| "?".into()),
            "UPDATE t SET c = ? WHERE id = ?"
        );
        assert!(Stmt::PointsCoveredSi
            .sql("t", pg)
            .ends_with("k IN ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)"));
        assert_eq!(Stmt::InsertOne as usize + 1, Stmt::COUNT);
    }

    #[test]
    fn the_cache_keeps_tables_apart() {
        let (a, b) = (Table { slot: 0, name: "a" }, Table { slot: 1, name: "b" });
        let mut c = StmtCache::default();
        c.insert(b, Stmt::Scan, 7);
        c.insert(a, Stmt::Scan, 3);
        assert_eq!(c.get(b, Stmt::Scan), Some(&7));
        c.clear_table(b);
        assert_eq!(c.get(b, Stmt::Scan), None);
        assert_eq!(c.get(a, Stmt::Scan), Some(&3));
        assert_eq!(c.get(a, Stmt::PointSelect), None);
    }

    #[test]
    fn load_statements_are_found_by_slot_and_rows() {
        let (a, b) = (Table { slot: 0, name: "a" }, Table { slot: 2, name: "c" });
        let mut c = LoadCache::default();
        c.insert(b, 1000, "b1000");
        c.insert(b, 500, "b500");
        c.insert(a, 1000, "a1000");
        assert_eq!(c.get(b, 500), Some(&"b500"));
        assert_eq!(c.get(a, 1000), Some(&"a1000"));
        assert_eq!(c.get(a, 500), None);
        assert_eq!(c.get(Table { slot: 9, name: "x" }, 1000), None);
        c.clear_table(b);
        assert_eq!(c.get(b, 1000), None);
        assert_eq!(c.get(a, 1000), Some(&"a1000"));
    }
}
