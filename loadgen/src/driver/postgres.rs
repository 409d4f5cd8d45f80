//! PostgreSQL over its unix socket, through the minimal protocol client in `pgwire`.
//! Statements are prepared once per connection; result rows are counted from the
//! command tag, never decoded.

use super::dialect::{Dialect, POSTGRES};
use super::micro::{LoadCache, StmtCache};
use super::pgwire::{PgClient, PgError, INT4, INT8, TIMESTAMP, VARCHAR};
use super::sql::{self, StmtKey, TableStmts};
use super::{Conn, DbError, DbResult, Driver, InsertRow, Inserted, RangeIndex, Table};
use crate::engine_stats;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The protocol carries at most 32767 parameters per Bind here (i16); a row takes 6.
const MAX_ROWS_PER_INSERT: usize = 32767 / 6;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// SQLSTATEs of conflicts a retry may resolve: serialization failure, deadlock, lock
/// not available, and unique violation (two clients re-inserting the same deleted id,
/// which sysbench also ignores). Everything else ends the step.
const IGNORABLE: [&str; 4] = ["40001", "40P01", "55P03", "23505"];

pub struct PostgresDriver {
    socket: PathBuf,
    user: String,
    database: String,
    target: String,
}

impl PostgresDriver {
    pub fn new(socket_dir: &str, port: u16, user: &str, database: &str) -> PostgresDriver {
        let socket = PathBuf::from(socket_dir).join(format!(".s.PGSQL.{port}"));
        let target = format!("{} as user {user}, database {database}", socket.display());
        PostgresDriver {
            socket,
            user: user.into(),
            database: database.into(),
            target,
        }
    }
}

impl Driver for PostgresDriver {
    fn name(&self) -> &'static str {
        "postgres"
    }

    /// What the sessions' backends read (engine_stats.rs, backends_read).
    fn buffer_counters(&self, sessions: &[u32]) -> DbResult<Option<BTreeMap<String, f64>>> {
        if sessions.is_empty() {
            return Ok(None);
        }
        engine_stats::backends_read(sessions)
            .map(Some)
            .map_err(|e| DbError::fatal(e.to_string()))
    }

    fn counters_read_inside(&self) -> bool {
        true
    }

    fn connect(&self) -> DbResult<Box<dyn Conn>> {
        let client = PgClient::connect(&self.socket, &self.user, &self.database, CONNECT_TIMEOUT)
            .map_err(|e| {
            DbError::fatal(format!(
                "cannot connect to PostgreSQL at {}: {}",
                self.target, e.message
            ))
        })?;
        Ok(Box::new(PgConn {
            client,
            dialect: &POSTGRES,
            stmts: TableStmts::default(),
            next_id: 0,
            micro: StmtCache::default(),
            loads: LoadCache::default(),
        }))
    }
}

pub(super) struct PgConn {
    pub(super) client: PgClient,
    /// The SQL this server reads.
    pub(super) dialect: &'static Dialect,
    /// The Insert Benchmark statements prepared on this connection, by their names.
    stmts: TableStmts<String>,
    pub(super) next_id: u32,
    /// Microbenchmark statements by table slot, and multi-row sbtest inserts by
    /// (table slot, rows); see `postgres_micro`.
    pub(super) micro: StmtCache<String>,
    pub(super) loads: LoadCache<String>,
}

pub(super) fn classify(e: PgError) -> DbError {
    match e.code.as_deref() {
        Some(code) if IGNORABLE.contains(&code) => DbError::ignorable(e.message),
        _ => DbError::fatal(e.message),
    }
}

/// The parameter types of an Insert Benchmark statement (its text is the dialect's).
fn types_for(key: StmtKey) -> Vec<u32> {
    match key {
        StmtKey::Insert(n, _) => [TIMESTAMP, INT4, INT4, INT4, INT4, VARCHAR].repeat(n),
        StmtKey::Delete => vec![INT8],
        StmtKey::Range(_) => vec![INT4],
        StmtKey::Point => vec![INT8; 10],
    }
}

/// Execute the Insert Benchmark statement `key` on `table`, preparing it on first use:
/// `params` writes its `nparams` parameters, `run` executes it by name.
fn with_stmt<T>(
    c: &mut PgConn,
    table: Table,
    key: StmtKey,
    run: impl FnOnce(&mut PgClient, &str) -> Result<T, PgError>,
) -> DbResult<T> {
    if c.stmts.get(table, key).is_none() {
        let name = format!("s{}", c.next_id);
        c.next_id += 1;
        let sql = c.dialect.ib_sql(key, table.name);
        c.client
            .prepare(&name, &sql, &types_for(key))
            .map_err(classify)?;
        c.stmts.insert(key, name);
    }
    let name = c.stmts.get(table, key).expect("prepared above");
    run(&mut c.client, name).map_err(classify)
}

impl PgConn {
    pub(super) fn batch(&mut self, sql: &str) -> DbResult<()> {
        self.client.simple_query(sql).map(|_| ()).map_err(classify)
    }

    /// The dialect's statements `templates` on `table`, one after another.
    pub(super) fn batches(&mut self, templates: &[&str], table: &str) -> DbResult<()> {
        for sql in self.dialect.fill_all(templates, table, "") {
            self.batch(&sql)?;
        }
        Ok(())
    }

    fn set_timeout(&mut self, timeout: Duration) -> DbResult<()> {
        self.batch(&format!(
            "SET statement_timeout = {}",
            timeout.as_millis().max(1)
        ))
    }

    /// The single row of a query returning integers (NULL as None).
    pub(super) fn query_ints(&mut self, sql: &str) -> DbResult<Vec<Option<i64>>> {
        let rows = self.client.simple_query(sql).map_err(classify)?;
        let row = rows
            .into_iter()
            .next()
            .ok_or_else(|| DbError::fatal(format!("no row from {sql}")))?;
        row.iter()
            .map(|v| match v {
                None => Ok(None),
                Some(s) => s
                    .parse()
                    .map(Some)
                    .map_err(|_| DbError::fatal(format!("{sql} returned {s}"))),
            })
            .collect()
    }
}

impl Conn for PgConn {
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
        if rows.len() > MAX_ROWS_PER_INSERT {
            return Err(DbError::fatal(format!(
                "{} rows per insert exceed this driver's limit of {MAX_ROWS_PER_INSERT}",
                rows.len()
            )));
        }
        let key = StmtKey::Insert(rows.len(), want_last_id);
        let (rows, last) = with_stmt(self, table, key, |client, name| {
            let (n, last) = client.execute_returning(name, rows.len() * 6, |p| {
                for r in rows {
                    p.timestamp(r.dateandtime);
                    p.i32(r.cashregisterid);
                    p.i32(r.customerid);
                    p.i32(r.productid);
                    p.i32(r.price);
                    p.str(&r.data);
                }
            })?;
            // Parsed here, from the client's reused buffer: nothing allocated.
            let parse = |v: &[u8]| std::str::from_utf8(v).ok()?.parse::<i64>().ok();
            Ok((n, last.map(parse)))
        })?;
        let last_id = match last {
            Some(Some(id)) => Some(id),
            Some(None) => return Err(DbError::fatal("INSERT RETURNING gave a non-integer key")),
            None => None,
        };
        Ok(Inserted { rows, last_id })
    }

    fn delete_oldest(&mut self, table: Table, n: u64) -> DbResult<u64> {
        with_stmt(self, table, StmtKey::Delete, |client, name| {
            client.execute(name, 1, |p| p.i64(n as i64))
        })
    }

    fn range_query(&mut self, table: Table, index: RangeIndex, start: i32) -> DbResult<u64> {
        with_stmt(self, table, StmtKey::Range(index), |client, name| {
            client.execute(name, 1, |p| p.i32(start))
        })
    }

    fn point_query(&mut self, table: Table, ids: &[i64; 10]) -> DbResult<u64> {
        with_stmt(self, table, StmtKey::Point, |client, name| {
            client.execute(name, 10, |p| ids.iter().for_each(|&id| p.i64(id)))
        })
    }

    fn count_rows(&mut self, table: Table) -> DbResult<u64> {
        sql::count_rows(self, table.name)
    }

    fn id_bounds(&mut self, table: Table) -> DbResult<Option<(i64, i64)>> {
        sql::id_bounds(self, table.name)
    }

    fn id_gaps(&mut self, table: Table) -> DbResult<Vec<(i64, i64)>> {
        let sql = self.dialect.fill(self.dialect.id_gaps, table.name, "");
        let rows = self.client.simple_query(&sql).map_err(classify)?;
        sql::gaps(&rows)
    }

    fn cleanup_table(&mut self, table: Table, timeout: Duration) -> DbResult<()> {
        self.set_timeout(timeout)?;
        self.batches(self.dialect.cleanup_table, table.name)
    }

    fn cleanup_engine(&mut self, timeout: Duration) -> DbResult<()> {
        self.set_timeout(timeout)?;
        self.batch("CHECKPOINT")
    }

    fn micro(&mut self) -> Option<&mut dyn super::micro::MicroConn> {
        Some(self)
    }

    fn session_pid(&self) -> Option<u32> {
        self.client.backend_pid()
    }
}

impl sql::QueryInts for PgConn {
    fn query_ints(&mut self, sql: &str) -> DbResult<Vec<Option<i64>>> {
        PgConn::query_ints(self, sql)
    }
}
