//! The Insert Benchmark (docs/lab-file.md, Steps): one table per client, pi1..piN. Each
//! step sets its client up (connections, row counts), waits at the common start, runs
//! its roles on scoped threads, waits at the check gate, and leaves its checks in a
//! `ClientOutcome`.

use super::insert_loops::{
    delete_behind, delete_paced, query_loop, InlineWriters, Inserter, Progress,
};
use super::live_ids::LiveIds;
use super::roles::{join, spawn_role};
use super::rows::RowGen;
use crate::context::StepContext;
use crate::driver::{Conn, DbResult, Table};
use crate::insert_spec::{InsertSpec, InsertStep};
use crate::outcome::{ClientOutcome, Histograms, RowCheck, StepPlan};
use crate::output::QUnit;
use crate::pace::{Pacing, Stop};
use crate::spec::StepSpec;
use crate::stats::OpKind;
use anyhow::{anyhow, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::time::Instant;

/// Which op kinds an Insert Benchmark step measures, which is Q, and the paced writers'
/// targets.
pub fn plan(spec: &StepSpec, ins: &InsertSpec) -> StepPlan {
    let rate = ins.insert_rate.unwrap_or(0);
    let writers = if rate > 0 {
        vec![OpKind::Insert, OpKind::Delete]
    } else {
        vec![]
    };
    let target = (rate * spec.clients as u64) as f64;
    let targets = writers.iter().map(|&k| (k, target)).collect();
    let (q_op, q_unit, kinds) = match ins.step {
        InsertStep::LoadI0 => (OpKind::Insert, QUnit::Rows, vec![OpKind::Insert]),
        InsertStep::CreateIndexes => (OpKind::CreateIndex, QUnit::Rows, vec![OpKind::CreateIndex]),
        InsertStep::LoadI1 | InsertStep::LoadI2 => (
            OpKind::Insert,
            QUnit::Rows,
            vec![OpKind::Insert, OpKind::Delete],
        ),
        InsertStep::Cleanup => (OpKind::Cleanup, QUnit::Ops, vec![OpKind::Cleanup]),
        InsertStep::RangeQueries => (
            OpKind::RangeQuery,
            QUnit::Ops,
            [vec![OpKind::RangeQuery], writers].concat(),
        ),
        InsertStep::PointQueries => (
            OpKind::PointQuery,
            QUnit::Ops,
            [vec![OpKind::PointQuery], writers].concat(),
        ),
    };
    let targets = if ins.step.is_query() { targets } else { vec![] };
    StepPlan {
        kinds,
        q_op,
        q_unit,
        targets,
    }
}

/// Run client `client` (1-based) of the step `ins` on its table.
pub fn run_client(ctx: &StepContext, ins: &InsertSpec, client: u32) -> Result<ClientOutcome> {
    let c = Client {
        ctx,
        ins,
        client,
        table: format!("pi{client}"),
    };
    match ins.step {
        InsertStep::LoadI0 => c.load(),
        InsertStep::CreateIndexes => c.create_indexes(),
        InsertStep::LoadI1 | InsertStep::LoadI2 => c.insert_and_delete(),
        InsertStep::Cleanup => c.cleanup(),
        InsertStep::RangeQueries | InsertStep::PointQueries => c.query(),
    }
}

struct Client<'a> {
    ctx: &'a StepContext,
    ins: &'a InsertSpec,
    client: u32,
    table: String,
}

/// Turn a set-up failure into an error naming what and where.
fn setup<T>(what: &str, table: &str, r: DbResult<T>) -> Result<T> {
    r.map_err(|e| anyhow!("{what} {table}: {}", e.message))
}

impl Client<'_> {
    /// This client's table, pi<client>, in slot client - 1.
    fn t(&self) -> Table<'_> {
        Table {
            slot: self.client as usize - 1,
            name: &self.table,
        }
    }

    /// A generator seeded with seed + client, one stream per role.
    fn rng(&self, role: u64) -> SmallRng {
        SmallRng::seed_from_u64((self.ctx.spec.seed + self.client as u64) ^ (role << 56))
    }

    fn rows_before(&self, conn: &mut dyn Conn) -> Result<u64> {
        match &self.ins.expected_rows {
            Some(rows) => Ok(rows[self.client as usize - 1]),
            None => setup("count rows of", &self.table, conn.count_rows(self.t())),
        }
    }

    fn start(&self) -> Result<Instant> {
        self.ctx
            .ready_and_wait()
            .ok_or_else(|| anyhow!("stopped before the start"))
    }

    fn outcome(
        &self,
        end: Instant,
        hists: Vec<Histograms>,
        conns: Vec<Box<dyn Conn>>,
    ) -> ClientOutcome {
        ClientOutcome {
            table: self.table.clone(),
            end,
            histograms: hists,
            conns,
            rows: None,
            point_rows: (0, 0),
        }
    }

    fn count(
        &self,
        conn: &mut dyn Conn,
        before: u64,
        inserted: u64,
        deleted: u64,
    ) -> Result<RowCheck> {
        let found = setup("count rows of", &self.table, conn.count_rows(self.t()))?;
        Ok(RowCheck {
            before,
            inserted,
            deleted,
            found,
        })
    }

    /// Which ids of the table are alive at the start of a point-query step.
    fn live_ids(&self, conn: &mut dyn Conn, rows: u64) -> Result<LiveIds> {
        let bounds = setup(
            "read the id range of",
            &self.table,
            conn.id_bounds(self.t()),
        )?;
        let contiguous = bounds.is_none_or(|(min, max)| (max - min + 1) as u64 == rows);
        let holes = if contiguous {
            Vec::new()
        } else {
            setup("find the id gaps of", &self.table, conn.id_gaps(self.t()))?
        };
        Ok(LiveIds::new(bounds, holes))
    }

    /// l.i0: create the table, insert in PK order as fast as possible.
    fn load(&self) -> Result<ClientOutcome> {
        let mut conn = self.ctx.connect()?;
        setup("create table", &self.table, conn.create_table(self.t()))?;
        let start = self.start()?;
        let mut w = self.ctx.worker(self.client, start);
        let rows = self.ins.rows.unwrap_or(0);
        let mut gen = RowGen::new(self.rng(0));
        let inserter = Inserter {
            table: self.t(),
            batch: self.ins.rows_per_commit(),
        };
        let inserted = inserter.run(
            &mut w,
            conn.as_mut(),
            &mut gen,
            Pacing::ClosedLoop,
            Stop::Units(rows),
            None,
            None,
        )?;
        let end = self.ctx.now();
        self.ctx.stop_timing(self.client, end)?;
        let check = self.count(conn.as_mut(), 0, inserted, 0)?;
        let mut o = self.outcome(end, vec![w.finish()], vec![conn]);
        o.rows = Some(check);
        Ok(o)
    }

    /// l.x: the three secondary indexes; Q counts the rows indexed.
    fn create_indexes(&self) -> Result<ClientOutcome> {
        let mut conn = self.ctx.connect()?;
        let rows = self.rows_before(conn.as_mut())?;
        let start = self.start()?;
        let mut w = self.ctx.worker(self.client, start);
        let table = self.t();
        w.call(OpKind::CreateIndex, start, || {
            conn.create_indexes(table).map(|_| rows)
        })?;
        Ok(self.outcome(self.ctx.now(), vec![w.finish()], vec![conn]))
    }

    /// cleanup: each table, then once for the engine by the last client to finish.
    fn cleanup(&self) -> Result<ClientOutcome> {
        let mut conn = self.ctx.connect()?;
        let start = self.start()?;
        let mut w = self.ctx.worker(self.client, start);
        let timeout = self.ins.cleanup_timeout();
        let table = self.t();
        w.call(OpKind::Cleanup, start, || {
            conn.cleanup_table(table, timeout).map(|_| 0)
        })?;
        if self.ctx.last_to_arrive() {
            let now = self.ctx.now();
            w.call(OpKind::Cleanup, now, || {
                conn.cleanup_engine(timeout).map(|_| 0)
            })?;
        }
        Ok(self.outcome(self.ctx.now(), vec![w.finish()], vec![conn]))
    }

    /// l.i1, l.i2: one connection inserts as fast as it can, another deletes the oldest
    /// rows behind it, so the table stays the same size (a FIFO queue).
    fn insert_and_delete(&self) -> Result<ClientOutcome> {
        let (mut ic, mut dc) = (self.ctx.connect()?, self.ctx.connect()?);
        let before = self.rows_before(dc.as_mut())?;
        let rows = self.ins.rows.unwrap_or(0);
        let batch = self.ins.rows_per_commit();
        let start = self.start()?;
        let progress = Progress::new(self.ins.lockstep);
        let mut gen = RowGen::new(self.rng(0));
        let (ctx, table, client) = (self.ctx, self.t(), self.client);
        let ((inserted, h1), (deleted, h2)) = std::thread::scope(|s| {
            let ins = spawn_role(s, ctx, (client, "insert"), start, |w| {
                let inserter = Inserter { table, batch };
                let stop = Stop::Units(rows);
                inserter.run(
                    w,
                    ic.as_mut(),
                    &mut gen,
                    Pacing::ClosedLoop,
                    stop,
                    None,
                    Some(&progress),
                )
            })?;
            let del = spawn_role(s, ctx, (client, "delete"), start, |w| {
                delete_behind(w, dc.as_mut(), table, batch, rows, &progress)
            })?;
            Ok::<_, anyhow::Error>((join(ins)?, join(del)?))
        })?;
        let end = self.ctx.now();
        self.ctx.stop_timing(self.client, end)?;
        let check = self.count(ic.as_mut(), before, inserted, deleted)?;
        let mut o = self.outcome(end, vec![h1, h2], vec![ic, dc]);
        o.rows = Some(check);
        Ok(o)
    }

    /// qr, qp: one connection queries as fast as it can for the duration while two
    /// others insert and delete at the target rate (none at rate 0).
    fn query(&self) -> Result<ClientOutcome> {
        let (spec, ins) = (&self.ctx.spec, self.ins);
        let point = ins.step == InsertStep::PointQueries;
        let mut qc = self.ctx.connect()?;
        let before = self.rows_before(qc.as_mut())?;
        let live = if point {
            Some(self.live_ids(qc.as_mut(), before)?)
        } else {
            None
        };
        let rate = ins.insert_rate.unwrap_or(0);
        let mut writers = Vec::new();
        if rate > 0 {
            writers = vec![self.ctx.connect()?, self.ctx.connect()?];
        }
        let batch = ins.rows_per_commit();
        let (mut qrng, mut gen) = (self.rng(1), RowGen::new(self.rng(0)));
        let start = self.start()?;
        let stop = Stop::Deadline(spec.deadline(start, ins.duration()));
        let (ctx, table, live) = (self.ctx, self.t(), live.as_ref());
        let client = self.client;
        // A counting replay (a window whose clock paces the writers): the writers run on
        // the query thread, between its queries (InlineWriters); else on threads of their own.
        let inline =
            !writers.is_empty() && ctx.window.as_ref().is_some_and(|w| w.spec.q_per_s > 0.0);
        let (point_rows, mut hists, inserted, deleted) = std::thread::scope(|s| {
            let (mut inserted, mut deleted, mut hists) = (0, 0, vec![]);
            if inline {
                let [ic, dc] = &mut writers[..] else {
                    unreachable!("two writer connections")
                };
                let q = spawn_role(s, ctx, (client, "query"), start, |w| {
                    let mut iw = InlineWriters::new(
                        ic.as_mut(),
                        dc.as_mut(),
                        table,
                        batch,
                        rate,
                        &mut gen,
                        stop,
                        live,
                        start,
                    );
                    let rows =
                        query_loop(w, qc.as_mut(), table, &mut qrng, stop, live, Some(&mut iw))?;
                    Ok((rows, iw.inserted, iw.deleted))
                })?;
                let ((point_rows, i, d), hq) = join(q)?;
                hists.push(hq);
                return Ok::<_, anyhow::Error>((point_rows, hists, i, d));
            }
            let q = spawn_role(s, ctx, (client, "query"), start, |w| {
                query_loop(w, qc.as_mut(), table, &mut qrng, stop, live, None)
            })?;
            if let [ic, dc] = &mut writers[..] {
                let ins = spawn_role(s, ctx, (client, "insert"), start, |w| {
                    let pacing = Pacing::rate(start, batch, rate);
                    Inserter { table, batch }.run(
                        w,
                        ic.as_mut(),
                        &mut gen,
                        pacing,
                        stop,
                        live,
                        None,
                    )
                })?;
                let del = spawn_role(s, ctx, (client, "delete"), start, |w| {
                    delete_paced(w, dc.as_mut(), table, batch, rate, stop, live)
                })?;
                let (i, h1) = join(ins)?;
                let (d, h2) = join(del)?;
                (inserted, deleted, hists) = (i, d, vec![h1, h2]);
            }
            let (point_rows, hq) = join(q)?;
            hists.push(hq);
            Ok::<_, anyhow::Error>((point_rows, hists, inserted, deleted))
        })?;
        let end = self.ctx.now();
        self.ctx.stop_timing(self.client, end)?;
        let check = self.count(qc.as_mut(), before, inserted, deleted)?;
        hists.shrink_to_fit();
        let mut conns = vec![qc];
        conns.append(&mut writers);
        let mut o = self.outcome(end, hists, conns);
        o.rows = Some(check);
        o.point_rows = point_rows;
        Ok(o)
    }
}
