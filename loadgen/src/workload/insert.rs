//! The Insert Benchmark (METHOD.md section 2): one table per client, pi1..piN. Each
//! step sets its client up (connections, row counts), waits at the common start, runs
//! its roles on scoped threads, waits at the check gate, and leaves its checks in a
//! `ClientOutcome`.

use super::live_ids::LiveIds;
use super::rows::{self, RowGen};
use super::{ClientOutcome, RowCheck};
use crate::driver::{Conn, DbResult};
use crate::pace::{sleep_until, Pacing, Stop};
use crate::runner::{StepContext, Worker};
use crate::spec::Step;
use crate::stats::OpKind;
use anyhow::{anyhow, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::sync::{Condvar, Mutex};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

pub(super) type Histograms = Vec<Option<hdrhistogram::Histogram<u64>>>;

/// Run client `client` (1-based) of the step on its table.
pub fn run_client(ctx: &StepContext, client: u32) -> Result<ClientOutcome> {
    let c = Client {
        ctx,
        client,
        table: format!("pi{client}"),
    };
    match ctx.spec.step {
        Step::LoadI0 => c.load(),
        Step::CreateIndexes => c.create_indexes(),
        Step::LoadI1 | Step::LoadI2 => c.insert_and_delete(),
        Step::Cleanup => c.cleanup(),
        Step::RangeQueries | Step::PointQueries => c.query(),
        other => Err(anyhow!(
            "step {} is not an Insert Benchmark step",
            other.name()
        )),
    }
}

struct Client<'a> {
    ctx: &'a StepContext,
    client: u32,
    table: String,
}

/// Turn a set-up failure into an error naming what and where.
fn setup<T>(what: &str, table: &str, r: DbResult<T>) -> Result<T> {
    r.map_err(|e| anyhow!("{what} {table}: {}", e.message))
}

impl Client<'_> {
    /// A generator seeded with seed + client, one stream per role.
    fn rng(&self, role: u64) -> SmallRng {
        SmallRng::seed_from_u64((self.ctx.spec.seed + self.client as u64) ^ (role << 56))
    }

    fn rows_before(&self, conn: &mut dyn Conn) -> Result<u64> {
        match &self.ctx.spec.insert.expected_rows {
            Some(rows) => Ok(rows[self.client as usize - 1]),
            None => setup("count rows of", &self.table, conn.count_rows(&self.table)),
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
        let found = setup("count rows of", &self.table, conn.count_rows(&self.table))?;
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
            conn.id_bounds(&self.table),
        )?;
        let contiguous = bounds.is_none_or(|(min, max)| (max - min + 1) as u64 == rows);
        let holes = if contiguous {
            Vec::new()
        } else {
            setup(
                "find the id gaps of",
                &self.table,
                conn.id_gaps(&self.table),
            )?
        };
        Ok(LiveIds::new(bounds, holes))
    }

    /// l.i0: create the table, insert in PK order as fast as possible.
    fn load(&self) -> Result<ClientOutcome> {
        let mut conn = self.ctx.connect()?;
        setup("create table", &self.table, conn.create_table(&self.table))?;
        let start = self.start()?;
        let mut w = self.ctx.worker(self.client, start);
        let rows = self.ctx.spec.insert.rows.unwrap_or(0);
        let mut gen = RowGen::new(self.rng(0));
        let inserter = Inserter {
            table: &self.table,
            batch: self.ctx.spec.rows_per_commit(),
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
        let end = Instant::now();
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
        let table = &self.table;
        w.call(OpKind::CreateIndex, start, || {
            conn.create_indexes(table).map(|_| rows)
        })?;
        Ok(self.outcome(Instant::now(), vec![w.finish()], vec![conn]))
    }

    /// cleanup: each table, then once for the engine by the last client to finish.
    fn cleanup(&self) -> Result<ClientOutcome> {
        let mut conn = self.ctx.connect()?;
        let start = self.start()?;
        let mut w = self.ctx.worker(self.client, start);
        let timeout = self.ctx.spec.cleanup_timeout();
        let table = &self.table;
        w.call(OpKind::Cleanup, start, || {
            conn.cleanup_table(table, timeout).map(|_| 0)
        })?;
        if self.ctx.last_to_arrive() {
            let now = Instant::now();
            w.call(OpKind::Cleanup, now, || {
                conn.cleanup_engine(timeout).map(|_| 0)
            })?;
        }
        Ok(self.outcome(Instant::now(), vec![w.finish()], vec![conn]))
    }

    /// l.i1, l.i2: one connection inserts as fast as it can, another deletes the oldest
    /// rows behind it, so the table stays the same size (a FIFO queue).
    fn insert_and_delete(&self) -> Result<ClientOutcome> {
        let (mut ic, mut dc) = (self.ctx.connect()?, self.ctx.connect()?);
        let before = self.rows_before(dc.as_mut())?;
        let rows = self.ctx.spec.insert.rows.unwrap_or(0);
        let batch = self.ctx.spec.rows_per_commit();
        let start = self.start()?;
        let progress = Progress::default();
        let mut gen = RowGen::new(self.rng(0));
        let (ctx, table, client) = (self.ctx, self.table.as_str(), self.client);
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
        let end = Instant::now();
        self.ctx.stop_timing(self.client, end)?;
        let check = self.count(ic.as_mut(), before, inserted, deleted)?;
        let mut o = self.outcome(end, vec![h1, h2], vec![ic, dc]);
        o.rows = Some(check);
        Ok(o)
    }

    /// qr, qp: one connection queries as fast as it can for the duration while two
    /// others insert and delete at the target rate (none at rate 0).
    fn query(&self) -> Result<ClientOutcome> {
        let spec = &self.ctx.spec;
        let point = spec.step == Step::PointQueries;
        let mut qc = self.ctx.connect()?;
        let before = self.rows_before(qc.as_mut())?;
        let live = if point {
            Some(self.live_ids(qc.as_mut(), before)?)
        } else {
            None
        };
        let rate = spec.insert.insert_rate.unwrap_or(0);
        let mut writers = Vec::new();
        if rate > 0 {
            writers = vec![self.ctx.connect()?, self.ctx.connect()?];
        }
        let batch = spec.rows_per_commit();
        let (mut qrng, mut gen) = (self.rng(1), RowGen::new(self.rng(0)));
        let start = self.start()?;
        let stop = Stop::Deadline(spec.deadline(start, spec.duration()));
        let (ctx, table, live) = (self.ctx, self.table.as_str(), live.as_ref());
        let client = self.client;
        let (point_rows, mut hists, inserted, deleted) = std::thread::scope(|s| {
            let q = spawn_role(s, ctx, (client, "query"), start, |w| {
                query_loop(w, qc.as_mut(), table, &mut qrng, stop, live)
            })?;
            let (mut inserted, mut deleted, mut hists) = (0, 0, vec![]);
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
        let end = Instant::now();
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

/// Run a role (client, name) on its own scoped thread, `client<n>-<name>`, with its own
/// recorder; a fatal error or a panic is reported to the runner at once.
pub(super) fn spawn_role<'scope, 'env, T: Send + 'scope>(
    s: &'scope Scope<'scope, 'env>,
    ctx: &'env StepContext,
    (client, role): (u32, &str),
    start: Instant,
    f: impl FnOnce(&mut Worker<'env>) -> Result<T> + Send + 'scope,
) -> Result<ScopedJoinHandle<'scope, Result<(T, Histograms)>>> {
    let name = format!("client{client}-{role}");
    let h = std::thread::Builder::new()
        .name(name.clone())
        .spawn_scoped(s, move || {
            ctx.catch_panics(|| {
                let mut w = ctx.worker(client, start);
                let r = ctx.guard(f(&mut w))?;
                Ok((r, w.finish()))
            })
        });
    // Stop the roles already started, or the scope would wait for them to end.
    ctx.guard(h.map_err(|e| anyhow!("cannot start thread {name}: {e}")))
}

pub(super) fn join<T>(h: ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    h.join().map_err(|_| anyhow!("a worker thread panicked"))?
}

/// Rows committed by the inserter, for a deleter that follows it.
#[derive(Default)]
struct Progress {
    state: Mutex<(u64, bool)>,
    cv: Condvar,
}

impl Progress {
    fn advance(&self, rows: u64) {
        self.state.lock().unwrap().0 += rows;
        self.cv.notify_one();
    }

    fn finish(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_one();
    }

    /// Wait until `rows` were inserted or the inserter finished; (inserted, finished).
    fn wait_for(&self, rows: u64, w: &Worker) -> (u64, bool) {
        let mut st = self.state.lock().unwrap();
        while st.0 < rows && !st.1 && !w.stopped() {
            st = self
                .cv
                .wait_timeout(st, Duration::from_millis(50))
                .unwrap()
                .0;
        }
        *st
    }
}

struct Inserter<'a> {
    table: &'a str,
    batch: u64,
}

impl Inserter<'_> {
    /// Insert batches until `stop`; returns rows inserted.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        w: &mut Worker,
        conn: &mut dyn Conn,
        gen: &mut RowGen,
        mut pacing: Pacing,
        stop: Stop,
        live: Option<&LiveIds>,
        progress: Option<&Progress>,
    ) -> Result<u64> {
        let mut done = 0;
        let result = (|| {
            while !w.stopped() {
                let intended = pacing.next_intended(Instant::now());
                if !stop.allows(intended, done) || !sleep_until(intended, &w.ctx.stop) {
                    break;
                }
                let rows = gen.batch(stop.next_batch(self.batch, done) as usize);
                let mut last_id = None;
                let (n, _) = w.call(OpKind::Insert, intended, || {
                    let r = conn.insert(self.table, rows, live.is_some())?;
                    last_id = r.last_id;
                    Ok(r.rows)
                })?;
                if let (Some(l), Some(n)) = (live, n) {
                    l.inserted(n, last_id);
                }
                if let Some(p) = progress {
                    p.advance(n.unwrap_or(0));
                }
                done += n.unwrap_or(0);
            }
            Ok(done)
        })();
        if let Some(p) = progress {
            p.finish();
        }
        result
    }
}

/// Delete the oldest rows as the inserter commits them, in batches, until `total`.
fn delete_behind(
    w: &mut Worker,
    conn: &mut dyn Conn,
    table: &str,
    batch: u64,
    total: u64,
    progress: &Progress,
) -> Result<u64> {
    let mut deleted = 0;
    while deleted < total && !w.stopped() {
        let (inserted, finished) = progress.wait_for(deleted + batch, w);
        let n = batch
            .min(inserted.saturating_sub(deleted))
            .min(total - deleted);
        if n == 0 {
            if finished || w.stopped() {
                break;
            }
            continue;
        }
        let (d, _) = w.call(OpKind::Delete, Instant::now(), || {
            conn.delete_oldest(table, n)
        })?;
        if d == Some(0) {
            break; // the table is empty: nothing left to follow
        }
        deleted += d.unwrap_or(0);
    }
    Ok(deleted)
}

/// Delete the oldest rows at the target rate until the deadline.
fn delete_paced(
    w: &mut Worker,
    conn: &mut dyn Conn,
    table: &str,
    batch: u64,
    rate: u64,
    stop: Stop,
    live: Option<&LiveIds>,
) -> Result<u64> {
    let mut pacing = Pacing::rate(w.start(), batch, rate);
    let mut deleted = 0;
    while !w.stopped() {
        let intended = pacing.next_intended(Instant::now());
        if !stop.allows(intended, deleted) || !sleep_until(intended, &w.ctx.stop) {
            break;
        }
        let old = live.map(|l| l.begin_delete(batch, &w.ctx.stop));
        let (d, _) = w.call(OpKind::Delete, intended, || {
            conn.delete_oldest(table, batch)
        })?;
        if let (Some(l), Some(old)) = (live, old) {
            l.end_delete(old, d);
        }
        deleted += d.unwrap_or(0);
    }
    Ok(deleted)
}

/// Range queries, or point queries on live ids when `live` is given, as fast as
/// possible until the deadline; returns (point rows expected, found).
fn query_loop(
    w: &mut Worker,
    conn: &mut dyn Conn,
    table: &str,
    rng: &mut SmallRng,
    stop: Stop,
    live: Option<&LiveIds>,
) -> Result<(u64, u64)> {
    let (mut expected, mut found) = (0, 0);
    let mut ids = [0i64; 10];
    let mut now = Instant::now();
    while stop.allows(now, 0) && !w.stopped() {
        now = match live {
            Some(live) => {
                let want = live.begin_query(rng, &mut ids);
                let r = w.call(OpKind::PointQuery, now, || conn.point_query(table, &ids));
                live.end_query();
                let (got, done) = r?;
                if let Some(got) = got {
                    expected += want;
                    found += got;
                }
                done
            }
            None => {
                let (index, start) = rows::range_query(rng);
                w.call(OpKind::RangeQuery, now, || {
                    conn.range_query(table, index, start)
                })?
                .1
            }
        };
    }
    Ok((expected, found))
}
