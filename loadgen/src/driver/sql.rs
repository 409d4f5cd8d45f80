//! Bookkeeping queries the PostgreSQL and MySQL clients run alike, written once. Each
//! client supplies `query_ints`; both engines read SQL keywords in any case.

use super::DbResult;

/// The first row of a query, its columns as integers (NULL as None).
pub(super) trait QueryInts {
    fn query_ints(&mut self, sql: &str) -> DbResult<Vec<Option<i64>>>;
}

pub(super) fn count_rows(c: &mut impl QueryInts, table: &str) -> DbResult<u64> {
    Ok(c.query_ints(&format!("SELECT COUNT(*) FROM {table}"))?[0].unwrap_or(0) as u64)
}

pub(super) fn id_bounds(c: &mut impl QueryInts, table: &str) -> DbResult<Option<(i64, i64)>> {
    let v = c.query_ints(&format!(
        "SELECT MIN(transactionid), MAX(transactionid) FROM {table}"
    ))?;
    Ok(v[0].zip(v[1]))
}

pub(super) fn count_ids(c: &mut impl QueryInts, table: &str, lo: i64, hi: i64) -> DbResult<u64> {
    let sql = format!("SELECT COUNT(*) FROM {table} WHERE id BETWEEN {lo} AND {hi}");
    Ok(c.query_ints(&sql)?[0].unwrap_or(0) as u64)
}

pub(super) fn max_id(c: &mut impl QueryInts, table: &str) -> DbResult<i64> {
    Ok(c.query_ints(&format!("SELECT MAX(id) FROM {table}"))?[0].unwrap_or(0))
}
