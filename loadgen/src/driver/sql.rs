//! Bookkeeping queries the PostgreSQL and MySQL clients run alike, written once. Each
//! client supplies `query_ints`; both engines read SQL keywords in any case.

use super::DbResult;

use super::DbError;

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
