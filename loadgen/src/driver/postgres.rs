//! PostgreSQL over its unix socket with the synchronous `postgres` crate. Statements are
//! prepared once per connection; queries run through `execute`, which counts result
//! rows from the command tag without building a `Row` per result row.

use super::{Conn, DbError, DbResult, Driver, InsertRow, RangeIndex};
use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{Client, Config, NoTls, Statement};
use std::collections::HashMap;
use std::time::Duration;

/// The protocol carries at most 65535 parameters per statement; a row takes 6.
const MAX_ROWS_PER_INSERT: usize = 65535 / 6;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct PostgresDriver {
    config: Config,
    target: String,
}

impl PostgresDriver {
    pub fn new(socket_dir: &str, port: u16, user: &str, database: &str) -> PostgresDriver {
        let mut config = Config::new();
        config
            .host_path(socket_dir)
            .port(port)
            .user(user)
            .dbname(database)
            .application_name("dbregress-loadgen")
            .connect_timeout(CONNECT_TIMEOUT);
        let target = format!("{socket_dir}/.s.PGSQL.{port} as user {user}, database {database}");
        PostgresDriver { config, target }
    }
}

impl Driver for PostgresDriver {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn connect(&self) -> DbResult<Box<dyn Conn>> {
        let client = self.config.connect(NoTls).map_err(|e| {
            DbError::fatal(format!(
                "cannot connect to PostgreSQL at {}: {}",
                self.target,
                describe(&e)
            ))
        })?;
        Ok(Box::new(PgConn {
            client,
            table: String::new(),
            stmts: HashMap::new(),
        }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum StmtKey {
    Insert(usize),
    Delete,
    Range(u8),
    Point,
}

struct PgConn {
    client: Client,
    /// The table the prepared statements in `stmts` name.
    table: String,
    stmts: HashMap<StmtKey, Statement>,
}

/// The driver's message for an error: SQLSTATE and server message, or the client's.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// Conflicts a retry may resolve are ignorable; everything else ends the step.
fn classify(e: postgres::Error) -> DbError {
    let ignorable = [
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::LOCK_NOT_AVAILABLE,
    ];
    match e.code() {
        Some(code) if ignorable.contains(code) => DbError::ignorable(describe(&e)),
        _ => DbError::fatal(describe(&e)),
    }
}

fn sql_for(key: StmtKey, t: &str) -> String {
    match key {
        StmtKey::Insert(n) => {
            let values: Vec<String> = (0..n)
                .map(|i| {
                    let p = i * 6;
                    format!(
                        "(${},${},${},${},${},${})",
                        p + 1,
                        p + 2,
                        p + 3,
                        p + 4,
                        p + 5,
                        p + 6
                    )
                })
                .collect();
            format!(
                "INSERT INTO {t} (dateandtime, cashregisterid, customerid, productid, price, data) \
                 VALUES {}",
                values.join(",")
            )
        }
        StmtKey::Delete => format!(
            "DELETE FROM {t} WHERE transactionid IN \
             (SELECT transactionid FROM {t} ORDER BY transactionid LIMIT $1)"
        ),
        StmtKey::Range(0) => format!(
            "SELECT productid, customerid, price FROM {t} WHERE productid >= $1 \
             ORDER BY productid, customerid, price LIMIT 10"
        ),
        StmtKey::Range(1) => format!(
            "SELECT cashregisterid, customerid, price FROM {t} WHERE cashregisterid >= $1 \
             ORDER BY cashregisterid, customerid, price LIMIT 10"
        ),
        StmtKey::Range(_) => format!(
            "SELECT price, dateandtime, customerid FROM {t} WHERE price >= $1 \
             ORDER BY price, dateandtime, customerid LIMIT 10"
        ),
        StmtKey::Point => format!(
            "SELECT transactionid, productid, data FROM {t} WHERE transactionid IN \
             ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)"
        ),
    }
}

impl PgConn {
    /// The statement prepared on this connection, preparing it on first use.
    fn prepared(&mut self, table: &str, key: StmtKey) -> DbResult<Statement> {
        if self.table != table {
            self.stmts.clear();
            self.table = table.to_string();
        }
        if let Some(s) = self.stmts.get(&key) {
            return Ok(s.clone());
        }
        let stmt = self
            .client
            .prepare(&sql_for(key, table))
            .map_err(classify)?;
        self.stmts.insert(key, stmt.clone());
        Ok(stmt)
    }

    fn batch(&mut self, sql: &str) -> DbResult<()> {
        self.client.batch_execute(sql).map_err(classify)
    }

    fn set_timeout(&mut self, timeout: Duration) -> DbResult<()> {
        self.batch(&format!(
            "SET statement_timeout = {}",
            timeout.as_millis().max(1)
        ))
    }
}

impl Conn for PgConn {
    fn create_table(&mut self, table: &str) -> DbResult<()> {
        self.stmts.clear();
        self.batch(&format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (\
             transactionid bigserial PRIMARY KEY, dateandtime timestamp, cashregisterid int, \
             customerid int, productid int, price int, data varchar(4000))"
        ))
    }

    fn create_indexes(&mut self, table: &str) -> DbResult<()> {
        self.batch(&format!(
            "CREATE INDEX {table}_marketsegment ON {table} (productid, customerid, price)"
        ))?;
        self.batch(&format!(
            "CREATE INDEX {table}_registersegment ON {table} (cashregisterid, customerid, price)"
        ))?;
        self.batch(&format!(
            "CREATE INDEX {table}_pdc ON {table} (price, dateandtime, customerid)"
        ))
    }

    fn insert(&mut self, table: &str, rows: &[InsertRow]) -> DbResult<u64> {
        if rows.len() > MAX_ROWS_PER_INSERT {
            return Err(DbError::fatal(format!(
                "{} rows per insert exceed PostgreSQL's limit of {MAX_ROWS_PER_INSERT}",
                rows.len()
            )));
        }
        let stmt = self.prepared(table, StmtKey::Insert(rows.len()))?;
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(rows.len() * 6);
        for r in rows {
            params.extend_from_slice(&[
                &r.dateandtime,
                &r.cashregisterid,
                &r.customerid,
                &r.productid,
                &r.price,
                &r.data,
            ]);
        }
        self.client.execute(&stmt, &params).map_err(classify)
    }

    fn delete_oldest(&mut self, table: &str, n: u64) -> DbResult<u64> {
        let stmt = self.prepared(table, StmtKey::Delete)?;
        self.client.execute(&stmt, &[&(n as i64)]).map_err(classify)
    }

    fn range_query(&mut self, table: &str, index: RangeIndex, start: i32) -> DbResult<u64> {
        let stmt = self.prepared(table, StmtKey::Range(index as u8))?;
        self.client.execute(&stmt, &[&start]).map_err(classify)
    }

    fn point_query(&mut self, table: &str, ids: &[i64; 10]) -> DbResult<u64> {
        let stmt = self.prepared(table, StmtKey::Point)?;
        let params: [&(dyn ToSql + Sync); 10] = std::array::from_fn(|i| &ids[i] as _);
        self.client.execute(&stmt, &params).map_err(classify)
    }

    fn count_rows(&mut self, table: &str) -> DbResult<u64> {
        let sql = format!("SELECT count(*) FROM {table}");
        let row = self.client.query_one(sql.as_str(), &[]).map_err(classify)?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    fn id_bounds(&mut self, table: &str) -> DbResult<Option<(i64, i64)>> {
        let sql = format!("SELECT min(transactionid), max(transactionid) FROM {table}");
        let row = self.client.query_one(sql.as_str(), &[]).map_err(classify)?;
        let (min, max): (Option<i64>, Option<i64>) = (row.get(0), row.get(1));
        Ok(min.zip(max))
    }

    fn cleanup_table(&mut self, table: &str, timeout: Duration) -> DbResult<()> {
        self.set_timeout(timeout)?;
        self.batch(&format!("VACUUM (ANALYZE, INDEX_CLEANUP ON) {table}"))
    }

    fn cleanup_engine(&mut self, timeout: Duration) -> DbResult<()> {
        self.set_timeout(timeout)?;
        self.batch("CHECKPOINT")
    }
}
