//! The kv steps' hot loops: a writer (closed loop or paced in bytes per second) and a
//! reader (gets or seeks) until their stop rule; every call goes through the runner's
//! timing, one clock read per operation in a closed loop.

use super::kv_data::{Key, Values};
use crate::context::{OpFailed, Worker};
use crate::driver::kv::KvConn;
use crate::pace::{sleep_until, Pacing, Stop};
use crate::stats::OpKind;
use anyhow::Result;
use rand::rngs::SmallRng;
use rand::Rng;
use std::time::{Duration, Instant};

/// A paced writer may issue a put this much before its intended start, so it wakes
/// about 100 times a second rather than once per put: on a CPU shared with the readers
/// (taskset -c 1) thousands of wake-ups a second would cost the readers a sizeable
/// share of it. db_bench's rate limiter is burstier still (100 ms refills).
const EARLY: Duration = Duration::from_millis(10);

/// Puts: keys in order (fillseq) or uniform among `keys`, until `stop`.
pub struct Writer<'a> {
    pub conn: &'a mut dyn KvConn,
    pub key: Key,
    pub values: &'a mut Values,
    pub rng: SmallRng,
}

impl Writer<'_> {
    /// Returns the puts done; a put that failed ignorably is retried with the next key.
    pub fn run(
        &mut self,
        w: &mut Worker,
        random: Option<u64>,
        mut pacing: Pacing,
        stop: Stop,
    ) -> Result<u64> {
        let mut done = 0;
        let mut now = w.now();
        while !w.stopped() {
            let intended = pacing.next_intended(now);
            if !stop.allows(intended, done) {
                break;
            }
            let from = match pacing {
                Pacing::ClosedLoop => intended,
                Pacing::Rate { .. } => match wait_for(&pacing, intended, w) {
                    Some(from) => from,
                    None => break,
                },
            };
            let n = random.map_or(done, |keys| self.rng.gen_range(0..keys));
            let (k, v) = (self.key.of(n), self.values.next());
            let (ok, end) = w.call(OpKind::Put, from, || self.conn.put(k, v).map(|_| 1))?;
            done += ok.unwrap_or(0);
            now = end;
        }
        Ok(done)
    }
}

/// The background writer run by a reader itself, between its reads: a counting replay's
/// way (a window whose clock paces the writer). Before each read the puts due by the
/// window's clock (1/q_per_s per Q call) run, so the writes per read are the run's and
/// every replay interleaves reads and puts alike; as a thread of its own the writer got
/// a few puts more or fewer before each window, as valgrind's scheduling let it, and the
/// memtable switched at another moment (overwriteandwait moved 0.8%).
pub struct InlinePuts<'a> {
    pub writer: Writer<'a>,
    pub keys: u64,
    pub pacing: Pacing,
    pub stop: Stop,
    next: Option<Instant>,
    pub done: u64,
}

impl<'a> InlinePuts<'a> {
    pub fn new(writer: Writer<'a>, keys: u64, pacing: Pacing, stop: Stop) -> Self {
        InlinePuts {
            writer,
            keys,
            pacing,
            stop,
            next: None,
            done: 0,
        }
    }

    /// Run every put due by `now` (the window's clock).
    pub fn catch_up(&mut self, w: &mut Worker, now: Instant) -> Result<()> {
        while !w.stopped() {
            let at = *self
                .next
                .get_or_insert_with(|| self.pacing.next_intended(now));
            if at > now || !self.stop.allows(at, self.done) {
                break;
            }
            self.next = None;
            let n = self.writer.rng.gen_range(0..self.keys);
            let (k, v) = (self.writer.key.of(n), self.writer.values.next());
            let conn = &mut self.writer.conn;
            let (ok, _) = w.call(OpKind::Put, at, || conn.put(k, v).map(|_| 1))?;
            self.done += ok.unwrap_or(0);
        }
        Ok(())
    }
}

/// Wait for a paced put due at `intended`: sleep only when it is due later than EARLY
/// from now, and then until it is due, so the puts of the next EARLY follow at once, one
/// wake-up for them all. Returns when the put starts (an early put counts its latency
/// from then), None when the step stops. On a profiler window's clock, it waits for
/// its turn exactly.
fn wait_for(pacing: &Pacing, intended: Instant, w: &Worker) -> Option<Instant> {
    if w.paced_by_window() {
        return w.wait_for_turn(pacing, intended).then(|| w.now());
    }
    let now = w.now();
    if intended <= now + EARLY {
        return Some(intended.min(now));
    }
    sleep_until(intended, &w.ctx.stop, &w.ctx.clock).then_some(intended)
}

/// Gets or range reads of uniform random keys.
pub struct Reader {
    pub op: OpKind,
    pub keys: u64,
    pub range_len: u64,
}

impl Reader {
    /// Returns (gets expected to find their key, found); a missing key ends the step.
    /// With `puts`, the puts due by the window's clock run before each read.
    pub fn run(
        &self,
        w: &mut Worker,
        conn: &mut dyn KvConn,
        key: &mut Key,
        mut rng: SmallRng,
        stop: Stop,
        mut puts: Option<&mut InlinePuts>,
    ) -> Result<(u64, u64)> {
        let (mut expected, mut found) = (0, 0);
        let mut now = w.now();
        while stop.allows(now, 0) && !w.stopped() {
            if let Some(p) = puts.as_deref_mut() {
                let clock = w.ctx.window.as_ref().and_then(|win| win.clock(w.start()));
                p.catch_up(w, clock.unwrap_or(now))?;
                if w.stopped() {
                    break;
                }
            }
            let n = rng.gen_range(0..self.keys);
            let k = key.of(n);
            let (rows, end) = match self.op {
                OpKind::Get => w.call(self.op, now, || conn.get(k).map(u64::from))?,
                OpKind::SeekNext => w.call(self.op, now, || conn.seek_next(k, self.range_len))?,
                _ => w.call(self.op, now, || conn.seek_prev(k, self.range_len))?,
            };
            if self.op == OpKind::Get && rows.is_some() {
                expected += 1;
                found += rows.unwrap_or(0);
                if rows == Some(0) {
                    return Err(missing(n, self.keys));
                }
            }
            now = end;
        }
        Ok((expected, found))
    }
}

fn missing(n: u64, keys: u64) -> anyhow::Error {
    OpFailed {
        op: OpKind::Get,
        message: format!(
            "key {n} not found: the database should hold keys 0..{keys} (kv.keys); \
             was it loaded by fillseq with the same kv.keys and kv.key_size?"
        ),
    }
    .into()
}
