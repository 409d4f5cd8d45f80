//! The Insert Benchmark's loops, one per role: the inserter, the deleter that follows
//! it or keeps the target rate, and the range or point queries. Every call goes through
//! the runner's `Worker`, which times it.

use super::live_ids::LiveIds;
use super::rows::{self, RowGen};
use crate::context::Worker;
use crate::driver::{Conn, Table};
use crate::pace::{Pacing, Stop};
use crate::stats::CachePadded;
use crate::stats::OpKind;
use anyhow::Result;
use rand::rngs::SmallRng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long a parked deleter sleeps before it looks at the stop flag again.
const WAIT: Duration = Duration::from_millis(50);

/// Rows committed by the inserter, for a deleter that follows it. A batch costs the
/// inserter two atomic accesses; it wakes the deleter only when the deleter is parked
/// waiting for what this batch reached, so a deleter that keeps busy is never woken.
/// `inserted`/`finished` against `want` is a store-then-load handshake on both sides
/// (each publishes, then reads the other's), which needs SeqCst: with anything weaker
/// both could miss the other and the deleter would sleep until its timeout.
///
/// With `lockstep` the two take turns: each insert batch waits until the deleter has
/// followed every row inserted before it (or is done), so the two sessions never run at
/// once and a window of insert calls holds the deletes of the same rows. `dbregress
/// explain` counts this way: under valgrind the deleter fell behind (a window held
/// about half its deletes), and how an insert and a delete overlapped changed what one
/// left the other (index entries already marked dead, or not) by 2-3% per row.
pub struct Progress {
    inserted: CachePadded<AtomicU64>,
    finished: AtomicBool,
    /// The row count the parked deleter waits for; u64::MAX when it is not parked.
    want: CachePadded<AtomicU64>,
    deleter: OnceLock<Thread>,
    lockstep: bool,
    /// Lockstep: inserted rows the deleter has dealt with; u64::MAX once it stopped.
    followed: CachePadded<AtomicU64>,
    inserter: OnceLock<Thread>,
}

impl Progress {
    pub fn new(lockstep: bool) -> Self {
        Progress {
            inserted: CachePadded(AtomicU64::new(0)),
            finished: AtomicBool::new(false),
            want: CachePadded(AtomicU64::new(u64::MAX)),
            deleter: OnceLock::new(),
            lockstep,
            followed: CachePadded(AtomicU64::new(0)),
            inserter: OnceLock::new(),
        }
    }

    pub fn advance(&self, rows: u64) {
        // Only the inserter writes `inserted`.
        let total = self.inserted.load(Relaxed) + rows;
        self.inserted.store(total, SeqCst);
        if total >= self.want.load(SeqCst) {
            self.wake();
        }
    }

    pub fn finish(&self) {
        self.finished.store(true, SeqCst);
        self.wake();
    }

    fn wake(&self) {
        if let Some(t) = self.deleter.get() {
            t.unpark();
        }
    }

    /// Wait until `rows` were inserted or the inserter finished; (inserted, finished).
    /// The one deleter calls it.
    pub fn wait_for(&self, rows: u64, stopped: &dyn Fn() -> bool) -> (u64, bool) {
        self.deleter.get_or_init(std::thread::current);
        loop {
            let st = (self.inserted.load(SeqCst), self.finished.load(SeqCst));
            if st.0 >= rows || st.1 || stopped() {
                self.want.store(u64::MAX, Relaxed);
                return st;
            }
            if self.want.load(Relaxed) != rows {
                // Publish what we wait for, then look again before parking.
                self.want.store(rows, SeqCst);
                continue;
            }
            // An unpark that comes before the park makes it return at once.
            std::thread::park_timeout(WAIT);
        }
    }

    /// Lockstep, the deleter: every row up to `rows` was dealt with (deleted, or found
    /// gone), or u64::MAX: it stopped. The inserter may go on.
    fn followed(&self, rows: u64) {
        if !self.lockstep {
            return;
        }
        self.followed.store(rows, SeqCst);
        if let Some(t) = self.inserter.get() {
            t.unpark();
        }
    }

    /// Lockstep, the inserter, before each batch: wait until the deleter followed every
    /// row inserted so far, or stopped. Returns at once without lockstep.
    fn wait_turn(&self, stopped: &dyn Fn() -> bool) {
        if !self.lockstep {
            return;
        }
        self.inserter.get_or_init(std::thread::current);
        while self.followed.load(SeqCst) < self.inserted.load(Relaxed) && !stopped() {
            std::thread::park_timeout(WAIT);
        }
    }
}

pub struct Inserter<'a> {
    pub table: Table<'a>,
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
                if let Some(p) = progress {
                    p.wait_turn(&|| w.stopped());
                }
                let intended = pacing.next_intended(w.now());
                if !stop.allows(intended, done) || !w.wait_for_turn(&pacing, intended) {
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
    table: Table,
    batch: u64,
    total: u64,
    progress: &Progress,
) -> Result<u64> {
    let mut deleted = 0;
    let mut followed = 0; // inserted rows dealt with: deleted, or not there to delete
    let result = (|| {
        while followed < total && !w.stopped() {
            let (inserted, finished) = progress.wait_for(followed + batch, &|| w.stopped());
            let n = batch
                .min(inserted.saturating_sub(followed))
                .min(total - followed);
            if n == 0 {
                if finished || w.stopped() {
                    break;
                }
                continue;
            }
            let (d, _) = w.call(OpKind::Delete, w.now(), || conn.delete_oldest(table, n))?;
            if d == Some(0) {
                break; // the table is empty: nothing left to follow
            }
            if let Some(d) = d {
                // An ignorable error (None) deletes nothing: the same rows are tried again.
                deleted += d;
                followed += n;
                progress.followed(followed);
            }
        }
        Ok(deleted)
    })();
    progress.followed(u64::MAX);
    result
}

/// Delete the oldest rows at the target rate until the deadline.
pub fn delete_paced(
    w: &mut Worker,
    conn: &mut dyn Conn,
    table: Table,
    batch: u64,
    rate: u64,
    stop: Stop,
    live: Option<&LiveIds>,
) -> Result<u64> {
    let mut pacing = Pacing::rate(w.start(), batch, rate);
    let mut deleted = 0;
    while !w.stopped() {
        let intended = pacing.next_intended(w.now());
        if !stop.allows(intended, deleted) || !w.wait_for_turn(&pacing, intended) {
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

/// A query step's paced writers run by the query thread itself, between its Q calls:
/// the counting replay's way (a window with q_per_s). Before each Q call the writes due
/// by the window's clock (1/q_per_s per Q call) run in their order, an insert batch on
/// one connection, a delete of the oldest rows on the other, so the writes per query
/// are the run's and the sessions never run at once: as two paced threads they
/// interleaved with the queries as the host scheduled them under valgrind, and what
/// one left the other (pages, dead index entries) moved a step's count by 2-7%.
pub struct InlineWriters<'a> {
    pub ic: &'a mut dyn Conn,
    pub dc: &'a mut dyn Conn,
    pub table: Table<'a>,
    pub batch: u64,
    pub gen: &'a mut RowGen,
    pub stop: Stop,
    pub live: Option<&'a LiveIds>,
    ins: Pacing,
    del: Pacing,
    next_ins: Option<Instant>,
    next_del: Option<Instant>,
    pub inserted: u64,
    pub deleted: u64,
}

impl<'a> InlineWriters<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ic: &'a mut dyn Conn,
        dc: &'a mut dyn Conn,
        table: Table<'a>,
        batch: u64,
        rate: u64,
        gen: &'a mut RowGen,
        stop: Stop,
        live: Option<&'a LiveIds>,
        start: Instant,
    ) -> Self {
        InlineWriters {
            ic,
            dc,
            table,
            batch,
            gen,
            stop,
            live,
            ins: Pacing::rate(start, batch, rate),
            del: Pacing::rate(start, batch, rate),
            next_ins: None,
            next_del: None,
            inserted: 0,
            deleted: 0,
        }
    }

    /// Run every write due by `now` (the window's clock): inserts before deletes due at
    /// the same moment, so a delete never overtakes the insert it follows.
    pub fn catch_up(&mut self, w: &mut Worker, now: Instant) -> Result<()> {
        while !w.stopped() {
            let ti = *self
                .next_ins
                .get_or_insert_with(|| self.ins.next_intended(now));
            let td = *self
                .next_del
                .get_or_insert_with(|| self.del.next_intended(now));
            let insert = ti <= td;
            let at = if insert { ti } else { td };
            if at > now || !self.stop.allows(at, 0) {
                break;
            }
            if insert {
                self.next_ins = None;
                let rows = self.gen.batch(self.batch as usize);
                let mut last_id = None;
                let (n, _) = w.call(OpKind::Insert, at, || {
                    let r = self.ic.insert(self.table, rows, self.live.is_some())?;
                    last_id = r.last_id;
                    Ok(r.rows)
                })?;
                if let (Some(l), Some(n)) = (self.live, n) {
                    l.inserted(n, last_id);
                }
                self.inserted += n.unwrap_or(0);
            } else {
                self.next_del = None;
                let old = self.live.map(|l| l.begin_delete_inline(self.batch));
                let (d, _) = w.call(OpKind::Delete, at, || {
                    self.dc.delete_oldest(self.table, self.batch)
                })?;
                if let (Some(l), Some(old)) = (self.live, old) {
                    l.end_delete(old, d);
                }
                self.deleted += d.unwrap_or(0);
            }
        }
        Ok(())
    }
}

/// Range queries, or point queries on live ids when `live` is given, as fast as
/// possible until the deadline; returns (point rows expected, found). With `writers`,
/// the writes due by the window's clock run before each query (InlineWriters).
#[allow(clippy::too_many_arguments)]
pub fn query_loop(
    w: &mut Worker,
    conn: &mut dyn Conn,
    table: Table,
    rng: &mut SmallRng,
    stop: Stop,
    live: Option<&LiveIds>,
    mut writers: Option<&mut InlineWriters>,
) -> Result<(u64, u64)> {
    let (mut expected, mut found) = (0, 0);
    let mut ids = [0i64; 10];
    let mut now = w.now();
    // Dropped when the loop ends, however: a delete waiting for it then goes on.
    let mut live = live.map(LiveIds::reader);
    while stop.allows(now, 0) && !w.stopped() {
        if let Some(iw) = writers.as_deref_mut() {
            let clock = w.ctx.window.as_ref().and_then(|win| win.clock(w.start()));
            iw.catch_up(w, clock.unwrap_or(now))?;
            if w.stopped() {
                break;
            }
        }
        now = match &mut live {
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

#[cfg(test)]
mod tests {
    use super::Progress;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

    /// The deleter's protocol as delete_behind follows it, with `work` for the delete.
    fn follow(p: &Progress, batch: u64, total: u64, work: impl Fn()) {
        let mut followed = 0;
        while followed < total {
            let (inserted, finished) = p.wait_for(followed + batch, &|| false);
            let n = batch.min(inserted - followed).min(total - followed);
            if n == 0 {
                if finished {
                    break;
                }
                continue;
            }
            work();
            followed += n;
            p.followed(followed);
        }
        p.followed(u64::MAX);
    }

    /// Runs 200 insert batches with a deleter behind; how many times one role's call
    /// began while the other's was in flight.
    fn overlaps(lockstep: bool) -> u64 {
        let p = Progress::new(lockstep);
        let (busy, overlaps) = (AtomicU32::new(0), AtomicU64::new(0));
        let call = |role: u32| {
            if busy.swap(role, SeqCst) != 0 {
                overlaps.fetch_add(1, SeqCst);
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
            busy.store(0, SeqCst);
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..200 {
                    p.wait_turn(&|| false);
                    call(1);
                    p.advance(5);
                }
                p.finish();
            });
            s.spawn(|| follow(&p, 5, 1000, || call(2)));
        });
        overlaps.load(SeqCst)
    }

    #[test]
    fn in_lockstep_an_insert_never_overlaps_a_delete() {
        assert_eq!(overlaps(true), 0);
    }

    #[test]
    fn a_deleter_that_stops_early_releases_the_inserter() {
        let p = Progress::new(true);
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..10 {
                    p.wait_turn(&|| false); // waits for ever unless the stopped deleter releases it
                    p.advance(5);
                }
                p.finish();
            });
            s.spawn(|| follow(&p, 5, 10, || ()));
        });
        assert_eq!(p.inserted.0.load(SeqCst), 50);
    }
}
