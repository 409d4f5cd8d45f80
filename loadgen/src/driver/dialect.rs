//! SQL dialects as data. Everything the PostgreSQL and MySQL families write differently
//! for the Insert Benchmark and the microbenchmarks lives in one `Dialect` value per
//! family: how a parameter is written, the tables' DDL, the delete of the oldest rows,
//! the id gap query, the per-table cleanup and how an insert returns its generated key.
//! The statement text both families share is written once here, from those parts.
//!
//! The wire drivers (postgres.rs over pgwire, mysql.rs over mywire) hold a `&'static
//! Dialect` and ask it for every statement; they keep only what is about their protocol
//! (parameter types, how rows and keys come back) and the engine's own procedures
//! (waiting for InnoDB's dirty pages). An engine that speaks one of the two protocols
//! with other SQL is a new `Dialect` here, not a copy of a driver.
//!
//! Templates name their parts in braces: `{t}` the table, `{engine}` the storage engine
//! (MySQL family), `{p0}` the statement's first parameter.

use super::micro::Stmt;
use super::sql::StmtKey;
use super::RangeIndex;

pub struct Dialect {
    /// How parameter i (0-based) is written in a prepared statement.
    pub placeholder: fn(usize) -> String,
    /// Appended to an insert that must return its last generated key; None when the
    /// protocol reports generated keys itself (MySQL's OK packet).
    pub returning: Option<&'static str>,
    /// (Re)create the Insert Benchmark's table, one statement each.
    pub ib_create: &'static [&'static str],
    /// Its three secondary indexes, one statement each.
    pub ib_indexes: &'static [&'static str],
    /// Delete the {p0} oldest rows (lowest transactionid).
    pub ib_delete_oldest: &'static str,
    /// Rows of (first, last) missing transactionid between the lowest and the highest.
    pub id_gaps: &'static str,
    /// After the write steps, per table: refresh statistics, reclaim dead rows.
    pub cleanup_table: &'static [&'static str],
    /// (Re)create sysbench's sbtest table, one statement each.
    pub sb_create: &'static [&'static str],
}

fn dollar(i: usize) -> String {
    format!("${}", i + 1)
}

fn question(_: usize) -> String {
    "?".into()
}

/// PostgreSQL and the engines that speak its protocol and SQL.
pub const POSTGRES: Dialect = Dialect {
    placeholder: dollar,
    returning: Some(" RETURNING transactionid"),
    ib_create: &[
        "DROP TABLE IF EXISTS {t}",
        "CREATE TABLE {t} (transactionid bigserial PRIMARY KEY, dateandtime timestamp, \
         cashregisterid int, customerid int, productid int, price int, data varchar(4000))",
    ],
    ib_indexes: &[
        "CREATE INDEX {t}_marketsegment ON {t} (productid, customerid, price)",
        "CREATE INDEX {t}_registersegment ON {t} (cashregisterid, customerid, price)",
        "CREATE INDEX {t}_pdc ON {t} (price, dateandtime, customerid)",
    ],
    ib_delete_oldest: "DELETE FROM {t} WHERE transactionid IN \
                       (SELECT transactionid FROM {t} ORDER BY transactionid LIMIT {p0})",
    id_gaps: "SELECT prev + 1, transactionid - 1 FROM (SELECT transactionid, \
              lag(transactionid) OVER (ORDER BY transactionid) AS prev FROM {t}) s \
              WHERE transactionid - prev > 1 ORDER BY 1",
    cleanup_table: &["VACUUM (ANALYZE, INDEX_CLEANUP ON) {t}"],
    sb_create: &[
        "DROP TABLE IF EXISTS {t}",
        "CREATE TABLE {t} (id integer NOT NULL, k integer NOT NULL DEFAULT 0, \
         c char(120) NOT NULL DEFAULT '', pad char(60) NOT NULL DEFAULT '', PRIMARY KEY (id))",
    ],
};

/// MySQL, MariaDB, Percona Server and MyRocks.
pub const MYSQL: Dialect = Dialect {
    placeholder: question,
    returning: None,
    ib_create: &[
        "DROP TABLE IF EXISTS {t}",
        "CREATE TABLE {t} (transactionid bigint NOT NULL AUTO_INCREMENT, \
         dateandtime datetime, cashregisterid int, customerid int, productid int, \
         price int, data varchar(4000), PRIMARY KEY (transactionid)) ENGINE={engine}",
    ],
    ib_indexes: &[
        "ALTER TABLE {t} ADD INDEX {t}_marketsegment (productid, customerid, price), \
         ADD INDEX {t}_registersegment (cashregisterid, customerid, price), \
         ADD INDEX {t}_pdc (price, dateandtime, customerid)",
    ],
    ib_delete_oldest: "DELETE FROM {t} ORDER BY transactionid LIMIT {p0}",
    // No window functions: MySQL 5.7 has none.
    id_gaps: "SELECT a.transactionid + 1, (SELECT MIN(b.transactionid) FROM {t} b \
              WHERE b.transactionid > a.transactionid) - 1 FROM {t} a \
              WHERE NOT EXISTS (SELECT 1 FROM {t} c WHERE c.transactionid = a.transactionid + 1) \
              AND a.transactionid < (SELECT MAX(transactionid) FROM {t}) ORDER BY 1",
    cleanup_table: &["ANALYZE TABLE {t}"],
    sb_create: &[
        "DROP TABLE IF EXISTS {t}",
        "CREATE TABLE {t} (id int NOT NULL, k int NOT NULL DEFAULT 0, \
         c char(120) NOT NULL DEFAULT '', pad char(60) NOT NULL DEFAULT '', \
         PRIMARY KEY (id)) ENGINE={engine}",
    ],
};

/// The Insert Benchmark's columns as its inserts list them.
const IB_COLUMNS: &str = "dateandtime, cashregisterid, customerid, productid, price, data";

impl Dialect {
    /// A template with its parts filled in.
    pub fn fill(&self, template: &str, table: &str, engine: &str) -> String {
        template
            .replace("{t}", table)
            .replace("{engine}", engine)
            .replace("{p0}", &(self.placeholder)(0))
    }

    /// Each of `templates` filled in.
    pub fn fill_all(&self, templates: &[&str], table: &str, engine: &str) -> Vec<String> {
        templates
            .iter()
            .map(|t| self.fill(t, table, engine))
            .collect()
    }

    /// `rows` groups of `n` parameters, numbered on across the groups: `(?,?),(?,?)`.
    pub fn values(&self, rows: usize, n: usize) -> String {
        let group = |r: usize| {
            let params: Vec<String> = (0..n).map(|i| (self.placeholder)(r * n + i)).collect();
            format!("({})", params.join(","))
        };
        (0..rows).map(group).collect::<Vec<_>>().join(",")
    }

    /// The Insert Benchmark statement `key` on table `t`.
    pub fn ib_sql(&self, key: StmtKey, t: &str) -> String {
        let ph = self.placeholder;
        let range = |cols: &str, first: &str| {
            format!(
                "SELECT {cols} FROM {t} WHERE {first} >= {} ORDER BY {cols} LIMIT 10",
                ph(0)
            )
        };
        match key {
            StmtKey::Insert(n, returning) => {
                let tail = if returning { self.returning } else { None };
                format!(
                    "INSERT INTO {t} ({IB_COLUMNS}) VALUES {}{}",
                    self.values(n, 6),
                    tail.unwrap_or("")
                )
            }
            StmtKey::Delete => self.fill(self.ib_delete_oldest, t, ""),
            StmtKey::Range(RangeIndex::MarketSegment) => {
                range("productid, customerid, price", "productid")
            }
            StmtKey::Range(RangeIndex::RegisterSegment) => {
                range("cashregisterid, customerid, price", "cashregisterid")
            }
            StmtKey::Range(RangeIndex::Pdc) => range("price, dateandtime, customerid", "price"),
            StmtKey::Point => format!(
                "SELECT transactionid, productid, data FROM {t} WHERE transactionid IN {}",
                self.values(1, 10)
            ),
        }
    }

    /// A microbenchmark statement on table `t`.
    pub fn micro_sql(&self, stmt: Stmt, t: &str) -> String {
        stmt.sql(t, self.placeholder)
    }

    /// A multi-row insert of `rows` sbtest rows into `t`.
    pub fn sb_insert(&self, t: &str, rows: usize) -> String {
        format!(
            "INSERT INTO {t} (id, k, c, pad) VALUES {}",
            self.values(rows, 4)
        )
    }

    /// The index on sbtest's k.
    pub fn k_index(&self, t: &str, index: &str) -> String {
        format!("CREATE INDEX {index} ON {t} (k)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The statements as the drivers wrote them before the dialects were data: the
    // servers see exactly the same text.
    #[test]
    fn postgres_statements() {
        let d = &POSTGRES;
        assert_eq!(
            d.ib_sql(StmtKey::Insert(2, true), "pi1"),
            "INSERT INTO pi1 (dateandtime, cashregisterid, customerid, productid, price, data) \
             VALUES ($1,$2,$3,$4,$5,$6),($7,$8,$9,$10,$11,$12) RETURNING transactionid"
        );
        assert!(!d
            .ib_sql(StmtKey::Insert(1, false), "pi1")
            .contains("RETURNING"));
        assert_eq!(
            d.ib_sql(StmtKey::Delete, "pi1"),
            "DELETE FROM pi1 WHERE transactionid IN \
             (SELECT transactionid FROM pi1 ORDER BY transactionid LIMIT $1)"
        );
        assert_eq!(
            d.ib_sql(StmtKey::Range(RangeIndex::RegisterSegment), "pi1"),
            "SELECT cashregisterid, customerid, price FROM pi1 WHERE cashregisterid >= $1 \
             ORDER BY cashregisterid, customerid, price LIMIT 10"
        );
        assert_eq!(
            d.ib_sql(StmtKey::Point, "pi1"),
            "SELECT transactionid, productid, data FROM pi1 WHERE transactionid IN \
             ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)"
        );
        assert_eq!(
            d.fill_all(d.ib_indexes, "pi1", "")[2],
            "CREATE INDEX pi1_pdc ON pi1 (price, dateandtime, customerid)"
        );
        assert_eq!(
            d.sb_insert("sbtest1", 2),
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1,$2,$3,$4),($5,$6,$7,$8)"
        );
        assert_eq!(
            d.micro_sql(Stmt::PointSelect, "sbtest1"),
            "SELECT c FROM sbtest1 WHERE id = $1"
        );
    }

    #[test]
    fn mysql_statements() {
        let d = &MYSQL;
        assert_eq!(
            d.ib_sql(StmtKey::Insert(1, true), "pi1"),
            "INSERT INTO pi1 (dateandtime, cashregisterid, customerid, productid, price, data) \
             VALUES (?,?,?,?,?,?)",
            "generated keys come from the OK packet"
        );
        assert_eq!(
            d.ib_sql(StmtKey::Delete, "pi1"),
            "DELETE FROM pi1 ORDER BY transactionid LIMIT ?"
        );
        assert_eq!(
            d.ib_sql(StmtKey::Range(RangeIndex::Pdc), "pi1"),
            "SELECT price, dateandtime, customerid FROM pi1 WHERE price >= ? \
             ORDER BY price, dateandtime, customerid LIMIT 10"
        );
        assert_eq!(
            d.ib_sql(StmtKey::Point, "pi1"),
            "SELECT transactionid, productid, data FROM pi1 WHERE transactionid IN \
             (?,?,?,?,?,?,?,?,?,?)"
        );
        let create = d.fill_all(d.ib_create, "pi1", "RocksDB");
        assert_eq!(create[0], "DROP TABLE IF EXISTS pi1");
        assert!(create[1].ends_with("PRIMARY KEY (transactionid)) ENGINE=RocksDB"));
        assert_eq!(
            d.fill_all(d.sb_create, "sbtest1", "InnoDB")[1],
            "CREATE TABLE sbtest1 (id int NOT NULL, k int NOT NULL DEFAULT 0, \
             c char(120) NOT NULL DEFAULT '', pad char(60) NOT NULL DEFAULT '', \
             PRIMARY KEY (id)) ENGINE=InnoDB"
        );
        assert_eq!(d.values(2, 2), "(?,?),(?,?)");
    }

    #[test]
    fn every_template_names_only_known_parts() {
        for (name, d) in [("postgres", &POSTGRES), ("mysql", &MYSQL)] {
            let templates = [d.ib_create, d.ib_indexes, d.cleanup_table, d.sb_create]
                .concat()
                .into_iter()
                .chain([d.ib_delete_oldest, d.id_gaps]);
            for t in templates {
                let filled = d.fill(t, "x", "E");
                assert!(!filled.contains('{'), "{name}: {t}");
                assert!(t.contains("{t}"), "{name}: {t}");
            }
        }
    }
}
