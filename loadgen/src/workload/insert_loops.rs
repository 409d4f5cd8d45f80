//! The Insert Benchmark's loops, one per role: the inserter, the deleter that follows
//! it or keeps the target rate, and the range or point queries. Every call goes through
//! the runner's `Worker`, which times it.

use super::live_ids::LiveIds;
use super::rows::{self, RowGen};
use crate::context::Worker;
use crate::driver::Conn;
use crate::pace::{sleep_until, Pacing, Stop};
use crate::stats::OpKind;
use anyhow::Result;
use rand::rngs::SmallRng;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Rows committed by the inserter, for a deleter that follows it.
#[derive(Default)]
pub struct Progress {
    state: Mutex<(u64, bool)>,
    cv: Condvar,
}

impl Progress {
    pub fn advance(&self, rows: u64) {
        self.state.lock().unwrap().0 += rows;
        self.cv.notify_one();
    }

    pub fn finish(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_one();
    }

    /// Wait until `rows` were inserted or the inserter finished; (inserted, finished).
    pub fn wait_for(&self, rows: u64, w: &Worker) -> (u64, bool) {
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

pub struct Inserter<'a> {
    pub table: &'a str,
    pub batch: u64,
}

impl Inserter<'_> {
    /// Insert batches until `stop`; returns rows inserted.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
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
pub fn delete_behind(
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
pub fn delete_paced(
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
pub fn query_loop(
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
