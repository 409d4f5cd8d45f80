//! The microbenchmarks' statements on MySQL-family servers: sysbench's sbtest schema
//! in the table's storage engine, statements prepared once per connection.

use super::micro::{Arg, MicroConn, SbRow, Stmt, Table};
use super::mysql::{classify, MyConn, MAX_PARAMS};
use super::sql;
use super::{DbError, DbResult};

impl MicroConn for MyConn {
    fn create_sbtest(&mut self, table: Table) -> DbResult<()> {
        self.micro.clear_table(table);
        self.loads.clear_table(table);
        self.batches(self.dialect.sb_create, table.name)
    }

    fn insert_sbtest(&mut self, table: Table, rows: &[SbRow]) -> DbResult<u64> {
        if rows.len() * 4 > MAX_PARAMS {
            return Err(DbError::fatal("too many rows for one insert"));
        }
        let stmt = match self.loads.get(table, rows.len()) {
            Some(&s) => s,
            None => {
                let sql = self.dialect.sb_insert(table.name, rows.len());
                let s = self.client.prepare(&sql).map_err(classify)?;
                self.loads.insert(table, rows.len(), s);
                s
            }
        };
        let r = self.client.execute(stmt, |p| {
            for r in rows {
                p.i64(r.id);
                p.i64(r.k);
                p.str(&r.c);
                p.str(&r.pad);
            }
        });
        r.map(|o| o.rows).map_err(classify)
    }

    fn create_k_index(&mut self, table: Table, index: &str) -> DbResult<()> {
        self.batch(&self.dialect.k_index(table.name, index))
    }

    fn exec(&mut self, table: Table, stmt: Stmt, args: &[Arg]) -> DbResult<u64> {
        let prepared = match self.micro.get(table, stmt) {
            Some(&p) => p,
            None => {
                let sql = self.dialect.micro_sql(stmt, table.name);
                let p = self.client.prepare(&sql).map_err(classify)?;
                self.micro.insert(table, stmt, p);
                p
            }
        };
        let r = self.client.execute(prepared, |p| {
            for a in args {
                match *a {
                    Arg::Int(v) => p.i64(v),
                    Arg::Str(s) => p.str(s),
                }
            }
        });
        r.map(|o| o.rows).map_err(classify)
    }

    fn begin(&mut self) -> DbResult<()> {
        self.batch("BEGIN")
    }

    fn commit(&mut self) -> DbResult<()> {
        self.batch("COMMIT")
    }

    fn rollback(&mut self) -> DbResult<()> {
        self.batch("ROLLBACK")
    }

    fn count_ids(&mut self, table: Table, lo: i64, hi: i64) -> DbResult<u64> {
        sql::count_ids(self, table.name, lo, hi)
    }

    fn max_id(&mut self, table: Table) -> DbResult<i64> {
        sql::max_id(self, table.name)
    }
}
