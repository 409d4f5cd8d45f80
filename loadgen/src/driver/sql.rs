//! What the PostgreSQL and MySQL clients do alike, written once: bookkeeping queries
//! (each client supplies `query_ints`; both engines read SQL keywords in any case), and
//! the cache of the Insert Benchmark's prepared statements.

use super::{DbError, DbResult, RangeIndex, Table};

/// One of the Insert Benchmark's statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StmtKey {
    /// Rows per statement, and whether it returns the generated keys.
    Insert(usize, bool),
    Delete,
    Range(RangeIndex),
    Point,
}

/// A connection's prepared Insert Benchmark statements, for one table at a time, found
/// without hashing or comparing names: the fixed ones by position, inserts in a short
/// list by (rows, returning) (a step uses one batch size, and a smaller last batch).
pub(super) struct TableStmts<T> {
    /// The slot of the table they are on.
    slot: Option<usize>,
    /// Delete, the three range queries, the point query.
    fixed: [Option<T>; 5],
    inserts: Vec<(usize, bool, T)>,
}

impl<T> Default for TableStmts<T> {
    fn default() -> Self {
        TableStmts {
            slot: None,
            fixed: [None, None, None, None, None],
            inserts: Vec::new(),
        }
    }
}

impl<T> TableStmts<T> {
    fn fixed_index(key: StmtKey) -> Option<usize> {
        match key {
            StmtKey::Insert(..) => None,
            StmtKey::Delete => Some(0),
            StmtKey::Range(RangeIndex::MarketSegment) => Some(1),
            StmtKey::Range(RangeIndex::RegisterSegment) => Some(2),
            StmtKey::Range(RangeIndex::Pdc) => Some(3),
            StmtKey::Point => Some(4),
        }
    }

    /// The statement prepared for `key` on `table`; another table's are forgotten.
    pub(super) fn get(&mut self, table: Table, key: StmtKey) -> Option<&T> {
        if self.slot != Some(table.slot) {
            self.clear();
            self.slot = Some(table.slot);
        }
        match (Self::fixed_index(key), key) {
            (Some(i), _) => self.fixed[i].as_ref(),
            (None, StmtKey::Insert(rows, returning)) => self
                .inserts
                .iter()
                .find(|(r, ret, _)| (*r, *ret) == (rows, returning))
                .map(|(_, _, v)| v),
            (None, _) => None,
        }
    }

    /// Keep `v` as the statement for `key` on the table of the last `get`.
    pub(super) fn insert(&mut self, key: StmtKey, v: T) {
        match (Self::fixed_index(key), key) {
            (Some(i), _) => self.fixed[i] = Some(v),
            (None, StmtKey::Insert(rows, returning)) => self.inserts.push((rows, returning, v)),
            (None, _) => {}
        }
    }

    pub(super) fn clear(&mut self) {
        self.slot = None;
        self.fixed = [None, None, None, None, None];
        self.inserts.clear();
    }
}

/// The first row of a query, its columns as integers (NULL as None).
pub(super) trait QueryInts {
    fn query_ints(&mut self, sql: &str) -> DbResult<Vec<Option<i64>>>;

    /// The first row's first `N` columns; fewer is the server's error.
    fn query_n<const N: usize>(&mut self, sql: &str) -> DbResult<[Option<i64>; N]> {
        let row = self.query_ints(sql)?;
        row.get(..N).and_then(|v| v.try_into().ok()).ok_or_else(|| {
            DbError::fatal(format!(
                "{sql} returned {} column(s), expected {N}",
                row.len()
            ))
        })
    }
}

pub(super) fn count_rows(c: &mut impl QueryInts, table: &str) -> DbResult<u64> {
    let [n] = c.query_n(&format!("SELECT COUNT(*) FROM {table}"))?;
    Ok(n.unwrap_or(0) as u64)
}

pub(super) fn id_bounds(c: &mut impl QueryInts, table: &str) -> DbResult<Option<(i64, i64)>> {
    let [lo, hi] = c.query_n(&format!(
        "SELECT MIN(transactionid), MAX(transactionid) FROM {table}"
    ))?;
    Ok(lo.zip(hi))
}

pub(super) fn count_ids(c: &mut impl QueryInts, table: &str, lo: i64, hi: i64) -> DbResult<u64> {
    let sql = format!("SELECT COUNT(*) FROM {table} WHERE id BETWEEN {lo} AND {hi}");
    let [n] = c.query_n(&sql)?;
    Ok(n.unwrap_or(0) as u64)
}

pub(super) fn max_id(c: &mut impl QueryInts, table: &str) -> DbResult<i64> {
    let [n] = c.query_n(&format!("SELECT MAX(id) FROM {table}"))?;
    Ok(n.unwrap_or(0))
}

/// Rows of (first, last) missing ids, as text from the id gap query.
pub(super) fn gaps(rows: &[Vec<Option<String>>]) -> DbResult<Vec<(i64, i64)>> {
    let int = |v: Option<&Option<String>>| v?.as_deref()?.parse::<i64>().ok();
    rows.iter()
        .map(|r| match (int(r.first()), int(r.get(1))) {
            (Some(lo), Some(hi)) => Ok((lo, hi)),
            _ => Err(DbError::fatal(format!(
                "unexpected row from the id gap query: {r:?}"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_kept_per_table_and_key() {
        let (a, b) = (
            Table {
                slot: 0,
                name: "pi1",
            },
            Table {
                slot: 1,
                name: "pi2",
            },
        );
        let mut c = TableStmts::default();
        assert_eq!(c.get(a, StmtKey::Point), None);
        c.insert(StmtKey::Point, 1);
        c.insert(StmtKey::Insert(100, true), 2);
        c.insert(StmtKey::Range(RangeIndex::Pdc), 3);
        assert_eq!(c.get(a, StmtKey::Point), Some(&1));
        assert_eq!(c.get(a, StmtKey::Insert(100, true)), Some(&2));
        assert_eq!(c.get(a, StmtKey::Insert(100, false)), None);
        assert_eq!(c.get(a, StmtKey::Insert(7, true)), None);
        assert_eq!(c.get(a, StmtKey::Range(RangeIndex::Pdc)), Some(&3));
        assert_eq!(c.get(a, StmtKey::Range(RangeIndex::MarketSegment)), None);
        // Another table forgets the first one's statements.
        assert_eq!(c.get(b, StmtKey::Point), None);
        assert_eq!(c.get(a, StmtKey::Point), None);
    }
}
