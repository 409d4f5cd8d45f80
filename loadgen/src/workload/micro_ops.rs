//! One operation of each timed microbenchmark step, as sysbench's scripts do it:
//! which statements, on which table, with which random values. One "operation" is one
//! statement, or one transaction for the read-only, write-only and read-write steps.

use super::micro_gen::{self, Zipf, HOT_IDS};
use crate::driver::micro::{Arg, MicroConn, Stmt, Table, IN_LIST};
use crate::driver::DbResult;
use crate::micro_spec::MicroStep as S;
use crate::stats::OpKind;
use rand::rngs::SmallRng;
use rand::Rng;

/// sysbench's point selects per read-only transaction.
const POINT_SELECTS: usize = 10;

/// The op kind a timed step records, and its Q.
pub fn op_kind(step: S) -> OpKind {
    match step {
        S::PointQuery
        | S::RandomPoints
        | S::HotPoints
        | S::PointsCoveredPk
        | S::PointsNotcoveredPk
        | S::PointsCoveredSi
        | S::PointsNotcoveredSi => OpKind::PointQuery,
        S::RangeCoveredPk | S::RangeNotcoveredPk | S::RangeCoveredSi | S::RangeNotcoveredSi => {
            OpKind::RangeQuery
        }
        S::Scan => OpKind::Query,
        S::ReadOnly
        | S::ReadOnlySimple
        | S::ReadOnlySum
        | S::ReadOnlyOrder
        | S::ReadOnlyDistinct
        | S::ReadOnlyCount
        | S::WriteOnly
        | S::ReadWrite => OpKind::Transaction,
        S::UpdateInlist | S::UpdateIndex | S::UpdateNonindex | S::UpdateOne | S::UpdateZipf => {
            OpKind::Update
        }
        S::Delete => OpKind::Delete,
        S::Insert | S::Load => OpKind::Insert,
        S::Cleanup => OpKind::Cleanup,
    }
}

/// Rows one successful operation surely returns when every id 1..=rows exists: the
/// primary-key point lookups. None where the count depends on the data.
pub fn expected_rows(step: S) -> Option<u64> {
    match step {
        S::PointQuery => Some(1),
        S::RandomPoints | S::HotPoints | S::PointsCoveredPk | S::PointsNotcoveredPk => {
            Some(IN_LIST as u64)
        }
        _ => None,
    }
}

/// Generates and runs one client's operations.
pub struct OpRunner {
    pub step: S,
    tables: Vec<String>,
    rows: i64,
    range: i64,
    rng: SmallRng,
    zipf: Option<Zipf>,
    ids: [i64; IN_LIST],
    c: String,
    pad: String,
    /// insert: the next id this client inserts, and the stride between its ids.
    next_id: i64,
    stride: i64,
}

impl OpRunner {
    /// `first_id`/`stride`: the ids the insert step uses (first, first + stride, ...).
    pub fn new(
        step: S,
        tables: Vec<String>,
        (rows, range): (u64, u64),
        rng: SmallRng,
        (first_id, stride): (i64, i64),
    ) -> OpRunner {
        let zipf = (step == S::UpdateZipf).then(|| Zipf::new(rows, Zipf::THETA));
        OpRunner {
            step,
            tables,
            rows: rows as i64,
            range: range as i64,
            rng,
            zipf,
            ids: [0; IN_LIST],
            c: String::with_capacity(120),
            pad: String::with_capacity(60),
            next_id: first_id,
            stride,
        }
    }

    /// A table chosen uniformly, as sysbench does for every statement.
    fn pick(&mut self) -> usize {
        if self.tables.len() == 1 {
            0
        } else {
            self.rng.gen_range(0..self.tables.len())
        }
    }

    fn table_at(&self, slot: usize) -> Table<'_> {
        Table {
            slot,
            name: &self.tables[slot],
        }
    }

    fn table(&mut self) -> Table<'_> {
        let slot = self.pick();
        self.table_at(slot)
    }

    fn id(&mut self) -> i64 {
        self.rng.gen_range(1..=self.rows)
    }

    /// Run one operation; returns the rows it returned or changed.
    pub fn run(&mut self, m: &mut dyn MicroConn) -> DbResult<u64> {
        match self.step {
            S::PointQuery => {
                let id = self.id();
                m.exec(self.table(), Stmt::PointSelect, &[Arg::Int(id)])
            }
            S::RandomPoints => self.in_list(m, Stmt::PointsAll, self.rows),
            S::HotPoints => self.in_list(m, Stmt::PointsAll, HOT_IDS.min(self.rows)),
            S::PointsCoveredPk => self.in_list(m, Stmt::PointsCoveredPk, self.rows),
            S::PointsNotcoveredPk => self.in_list(m, Stmt::PointsNotCoveredPk, self.rows),
            S::PointsCoveredSi => self.in_list(m, Stmt::PointsCoveredSi, self.rows),
            S::PointsNotcoveredSi => self.in_list(m, Stmt::PointsNotCoveredSi, self.rows),
            S::RangeCoveredPk => self.range(m, Stmt::RangeCoveredPk),
            S::RangeNotcoveredPk => self.range(m, Stmt::RangeNotCoveredPk),
            S::RangeCoveredSi => self.range(m, Stmt::RangeCoveredSi),
            S::RangeNotcoveredSi => self.range(m, Stmt::RangeNotCoveredSi),
            S::Scan => m.exec(self.table(), Stmt::Scan, &[]),
            S::ReadOnly
            | S::ReadOnlySimple
            | S::ReadOnlySum
            | S::ReadOnlyOrder
            | S::ReadOnlyDistinct
            | S::ReadOnlyCount
            | S::WriteOnly
            | S::ReadWrite => self.transaction(m),
            S::UpdateInlist => self.in_list(m, Stmt::UpdateInList, self.rows),
            S::UpdateIndex => {
                let id = self.id();
                m.exec(self.table(), Stmt::UpdateIndex, &[Arg::Int(id)])
            }
            S::UpdateNonindex => {
                let id = self.id();
                self.update_c(m, id)
            }
            S::UpdateOne => self.update_c(m, 1),
            S::UpdateZipf => {
                let id = self.zipf.as_ref().expect("made for update-zipf");
                let id = id.sample(&mut self.rng);
                self.update_c(m, id)
            }
            S::Delete => {
                let id = self.id();
                m.exec(self.table(), Stmt::DeleteOne, &[Arg::Int(id)])
            }
            S::Insert => {
                let id = self.next_id;
                self.next_id += self.stride;
                self.insert(m, id)
            }
            S::Load | S::Cleanup => unreachable!("load and cleanup are not timed steps"),
        }
    }

    /// An IN-list of 10 distinct ids (or k values) drawn from 1..=n.
    fn in_list(&mut self, m: &mut dyn MicroConn, stmt: Stmt, n: i64) -> DbResult<u64> {
        micro_gen::distinct_ids(&mut self.rng, n, &mut self.ids);
        let ids = self.ids;
        let args: [Arg; IN_LIST] = ids.map(Arg::Int);
        m.exec(self.table(), stmt, &args)
    }

    /// `range_size` consecutive ids (or k values) inside 1..=rows.
    fn range(&mut self, m: &mut dyn MicroConn, stmt: Stmt) -> DbResult<u64> {
        let lo = self.rng.gen_range(1..=self.rows - self.range + 1);
        let args = [Arg::Int(lo), Arg::Int(lo + self.range - 1)];
        m.exec(self.table(), stmt, &args)
    }

    fn update_c(&mut self, m: &mut dyn MicroConn, id: i64) -> DbResult<u64> {
        micro_gen::fill_c(&mut self.rng, &mut self.c);
        let slot = self.pick();
        let t = self.table_at(slot);
        m.exec(t, Stmt::UpdateNonIndex, &[Arg::Str(&self.c), Arg::Int(id)])
    }

    fn insert(&mut self, m: &mut dyn MicroConn, id: i64) -> DbResult<u64> {
        let k = self.id();
        micro_gen::fill_c(&mut self.rng, &mut self.c);
        micro_gen::fill_pad(&mut self.rng, &mut self.pad);
        let slot = self.pick();
        let t = self.table_at(slot);
        let args = [
            Arg::Int(id),
            Arg::Int(k),
            Arg::Str(&self.c),
            Arg::Str(&self.pad),
        ];
        m.exec(t, Stmt::InsertOne, &args)
    }

    /// BEGIN, the step's statements, COMMIT; ROLLBACK after a failed statement.
    fn transaction(&mut self, m: &mut dyn MicroConn) -> DbResult<u64> {
        m.begin()?;
        match self.transaction_body(m) {
            Ok(rows) => m.commit().map(|_| rows),
            Err(e) => {
                m.rollback()?;
                Err(e)
            }
        }
    }

    fn transaction_body(&mut self, m: &mut dyn MicroConn) -> DbResult<u64> {
        let ranges: &[Stmt] = match self.step {
            S::ReadOnlySimple => &[Stmt::SimpleRange],
            S::ReadOnlySum => &[Stmt::SumRange],
            S::ReadOnlyOrder => &[Stmt::OrderRange],
            S::ReadOnlyDistinct => &[Stmt::DistinctRange],
            S::ReadOnlyCount => &[Stmt::CountRange],
            S::WriteOnly => &[],
            _ => &[
                Stmt::SimpleRange,
                Stmt::SumRange,
                Stmt::OrderRange,
                Stmt::DistinctRange,
            ],
        };
        let mut rows = 0;
        if matches!(self.step, S::ReadOnly | S::ReadWrite) {
            for _ in 0..POINT_SELECTS {
                let id = self.id();
                rows += m.exec(self.table(), Stmt::PointSelect, &[Arg::Int(id)])?;
            }
        }
        for &stmt in ranges {
            rows += self.range(m, stmt)?;
        }
        if matches!(self.step, S::WriteOnly | S::ReadWrite) {
            rows += self.writes(m)?;
        }
        Ok(rows)
    }

    /// sysbench's write part: an index update, a non-index update, then delete a row
    /// and insert it back, each on a random table.
    fn writes(&mut self, m: &mut dyn MicroConn) -> DbResult<u64> {
        let id = self.id();
        let mut rows = m.exec(self.table(), Stmt::UpdateIndex, &[Arg::Int(id)])?;
        let id = self.id();
        rows += self.update_c(m, id)?;
        let id = self.id();
        let slot = self.pick();
        rows += m.exec(self.table_at(slot), Stmt::DeleteOne, &[Arg::Int(id)])?;
        let k = self.rng.gen_range(1..=self.rows);
        micro_gen::fill_c(&mut self.rng, &mut self.c);
        micro_gen::fill_pad(&mut self.rng, &mut self.pad);
        let args = [
            Arg::Int(id),
            Arg::Int(k),
            Arg::Str(&self.c),
            Arg::Str(&self.pad),
        ];
        rows += m.exec(self.table_at(slot), Stmt::InsertOne, &args)?;
        Ok(rows)
    }
}
