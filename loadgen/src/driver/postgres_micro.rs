//! The microbenchmarks' statements on PostgreSQL: sysbench's sbtest schema, statements
//! prepared once per connection with binary int4/varchar parameters.

use super::micro::{Arg, MicroConn, SbRow, Stmt, Table};
use super::pgwire::{INT4, VARCHAR};
use super::postgres::{classify, PgConn};
use super::sql;
use super::{DbError, DbResult};

/// Parameters per Bind are an i16 here; an sbtest row takes 4.
const MAX_ROWS_PER_INSERT: usize = 32767 / 4;

fn types(args: &[Arg]) -> Vec<u32> {
    args.iter()
        .map(|a| match a {
            Arg::Int(_) => INT4,
            Arg::Str(_) => VARCHAR,
        })
        .collect()
}

impl PgConn {
    fn prepare_named(&mut self, sql: &str, types: &[u32]) -> DbResult<String> {
        let name = format!("s{}", self.next_id);
        self.next_id += 1;
        self.client.prepare(&name, sql, types).map_err(classify)?;
        Ok(name)
    }
}

impl MicroConn for PgConn {
    fn create_sbtest(&mut self, table: Table) -> DbResult<()> {
        self.micro.clear_table(table);
        self.loads.clear_table(table);
        self.batches(self.dialect.sb_create, table.name)
    }

    fn insert_sbtest(&mut self, table: Table, rows: &[SbRow]) -> DbResult<u64> {
        if rows.len() > MAX_ROWS_PER_INSERT {
            return Err(DbError::fatal("too many rows for one insert"));
        }
        if self.loads.get(table, rows.len()).is_none() {
            let sql = self.dialect.sb_insert(table.name, rows.len());
            let name =
                self.prepare_named(&sql, &[INT4, INT4, VARCHAR, VARCHAR].repeat(rows.len()))?;
            self.loads.insert(table, rows.len(), name);
        }
        let name = self.loads.get(table, rows.len()).expect("prepared above");
        let r = self.client.execute(name, rows.len() * 4, |p| {
            for r in rows {
                p.i32(r.id as i32);
                p.i32(r.k as i32);
                p.str(&r.c);
                p.str(&r.pad);
            }
        });
        r.map_err(classify)
    }

    fn create_k_index(&mut self, table: Table, index: &str) -> DbResult<()> {
        self.batch(&self.dialect.k_index(table.name, index))
    }

    fn exec(&mut self, table: Table, stmt: Stmt, args: &[Arg]) -> DbResult<u64> {
        if self.micro.get(table, stmt).is_none() {
            let sql = self.dialect.micro_sql(stmt, table.name);
            let name = self.prepare_named(&sql, &types(args))?;
            self.micro.insert(table, stmt, name);
        }
        let name = self.micro.get(table, stmt).expect("prepared above");
        let r = self.client.execute(name, args.len(), |p| {
            for a in args {
                match *a {
                    Arg::Int(v) => p.i32(v as i32),
                    Arg::Str(s) => p.str(s),
                }
            }
        });
        r.map_err(classify)
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
