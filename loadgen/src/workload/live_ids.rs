//! Which primary keys of one table are surely alive, so point queries can check their
//! results. Ids are contiguous (one inserter per table, auto-increment); the live ids
//! are `(horizon, max]` less the holes.
//!
//! The deleter moves the horizon *before* it deletes, then waits until no point query
//! still relies on the old horizon. The query thread, through its `LiveReader`, writes
//! nothing per query: before and after each query it reads the deleter's request number
//! and, only when it changed, acknowledges it (and unparks the deleter). A query begun
//! after the acknowledgement reads the new horizon (the request is published after the
//! horizon, Release/Acquire); one begun before has ended (the acknowledgement follows it
//! in program order). So a query costs a few plain loads: no read-modify-write, no lock,
//! no fence. The deleter, a few times a second, parks until the acknowledgement.

use crate::stats::CachePadded;
use rand::Rng;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::Duration;

/// The horizon while a delete may reach rows committed meanwhile: no id is trusted.
const TRUST_NONE: i64 = i64::MAX - 1;

/// The acknowledgement of a reader that ended: every request is answered.
const GONE: u64 = u64::MAX;

/// How long a parked deleter sleeps before it looks at the stop flag again.
const WAIT: Duration = Duration::from_millis(50);

/// A key no auto-increment table holds; pads a point query with fewer live ids.
pub const ABSENT_ID: i64 = -1;

/// Inclusive ranges of ids that do not exist, sorted: values an auto-increment skipped
/// (failed inserts, a crash). Usually empty. Shared as a snapshot the reader keeps.
type Holes = Arc<Vec<(i64, i64)>>;

/// What the deleter writes.
#[derive(Default)]
struct DeleterSide {
    horizon: AtomicI64,
    /// Requests made so far: each asks the reader to acknowledge that no query still
    /// relies on an older horizon.
    request: AtomicU64,
}

pub struct LiveIds {
    deleter: CachePadded<DeleterSide>,
    /// Written by the inserter.
    max: CachePadded<AtomicI64>,
    /// Written by the reader, once per request: the last request it acknowledged.
    ack: CachePadded<AtomicU64>,
    /// Bumped (under the `holes` lock) whenever the holes change.
    holes_gen: CachePadded<AtomicU64>,
    holes: Mutex<Holes>,
    /// The deleter's thread, for the reader to unpark.
    waiter: Mutex<Option<Thread>>,
}

/// The id `n` live ids after `id`, skipping holes.
fn nth_live_after(mut id: i64, mut n: i64, holes: &[(i64, i64)]) -> i64 {
    for &(lo, hi) in holes {
        if hi <= id {
            continue;
        }
        if lo <= id {
            id = hi;
            continue;
        }
        let gap = lo - id - 1;
        if n <= gap {
            return id + n;
        }
        n -= gap;
        id = hi;
    }
    id + n
}

/// Live ids in (h, max].
fn live_count(h: i64, max: i64, holes: &[(i64, i64)]) -> i64 {
    let missing: i64 = holes
        .iter()
        .map(|&(lo, hi)| (hi.min(max) - lo.max(h + 1) + 1).max(0))
        .sum();
    (max - h - missing).max(0)
}

impl LiveIds {
    /// From the table's smallest and largest id at the start of the step and the
    /// ids missing in between.
    pub fn new(bounds: Option<(i64, i64)>, holes: Vec<(i64, i64)>) -> LiveIds {
        let (min, max) = bounds.unwrap_or((1, 0));
        LiveIds {
            deleter: CachePadded(DeleterSide {
                horizon: AtomicI64::new(min - 1),
                request: AtomicU64::new(0),
            }),
            max: CachePadded(AtomicI64::new(max)),
            ack: CachePadded(AtomicU64::new(0)),
            holes_gen: CachePadded(AtomicU64::new(0)),
            holes: Mutex::new(Arc::new(holes)),
            waiter: Mutex::new(None),
        }
    }

    /// The point-query thread's side; one at a time. Until the first one exists, a
    /// delete waits for it (no query can be in flight, but none is needed either).
    pub fn reader(&self) -> LiveReader<'_> {
        let holes = self.holes.lock().unwrap().clone();
        let mut r = LiveReader {
            live: self,
            seen: GONE,
            gen: self.holes_gen.load(Acquire),
            holes,
        };
        r.acknowledge();
        r
    }

    /// The inserter committed `rows` rows, the largest id being `last_id` when known.
    pub fn inserted(&self, rows: u64, last_id: Option<i64>) {
        // Only the inserter writes `max`.
        let max = self.max.load(Relaxed);
        match last_id {
            Some(last) if rows > 0 => {
                let first = last - rows as i64 + 1;
                if first > max + 1 {
                    let mut holes = self.holes.lock().unwrap();
                    Arc::make_mut(&mut holes).push((max + 1, first - 1));
                    self.holes_gen.fetch_add(1, Release);
                }
                // After the hole: a reader that sees the new max sees the hole too.
                self.max.store(last, Release);
            }
            _ => self.max.store(max + rows as i64, Release),
        }
    }

    /// Called by the deleter before deleting the `n` oldest rows; returns the old
    /// horizon. Parks until the reader acknowledges, or the step stops.
    pub fn begin_delete(&self, n: u64, stop: &AtomicBool) -> i64 {
        let d = &self.deleter;
        let old = self.move_horizon(n);
        *self.waiter.lock().unwrap() = Some(std::thread::current());
        let r = d.request.load(Relaxed) + 1;
        d.request.store(r, Release);
        // An unpark that comes before the park makes it return at once: no lost wake-up.
        while self.ack.load(Acquire) < r && !stop.load(Relaxed) {
            std::thread::park_timeout(WAIT);
        }
        old
    }

    /// The horizon past the `n` oldest live rows; returns the old one. Only the deleter
    /// writes the horizon and the request number.
    fn move_horizon(&self, n: u64) -> i64 {
        let d = &self.deleter;
        let old = d.horizon.load(Relaxed);
        let new = {
            let holes = self.holes.lock().unwrap();
            if live_count(old, self.max.load(Acquire), &holes) > n as i64 {
                nth_live_after(old, n as i64, &holes)
            } else {
                TRUST_NONE // the delete may reach rows committed meanwhile
            }
        };
        d.horizon.store(new, Release);
        old
    }

    /// begin_delete for a delete that the point-query thread runs itself, between its
    /// queries (a counting replay's inline writers): no query is in flight, so there is
    /// no reader to wait for; its next query reads the new horizon.
    pub fn begin_delete_inline(&self, n: u64) -> i64 {
        self.move_horizon(n)
    }

    /// The delete ended having removed `deleted` rows (None after an error).
    pub fn end_delete(&self, old: i64, deleted: Option<u64>) {
        let mut holes = self.holes.lock().unwrap();
        let h = nth_live_after(old, deleted.unwrap_or(0) as i64, &holes);
        if holes.iter().any(|&(_, hi)| hi <= h) {
            Arc::make_mut(&mut holes).retain(|&(_, hi)| hi > h);
            self.holes_gen.fetch_add(1, Release);
        }
        self.deleter.horizon.store(h, Release);
    }

    fn wake_deleter(&self) {
        if let Some(t) = &*self.waiter.lock().unwrap() {
            t.unpark();
        }
    }
}

/// The point-query thread's view of the live ids: its copy of the holes, and the last
/// request of the deleter it acknowledged. Dropping it answers every request.
pub struct LiveReader<'a> {
    live: &'a LiveIds,
    seen: u64,
    /// `holes` is the snapshot of generation `gen`.
    gen: u64,
    holes: Holes,
}

impl LiveReader<'_> {
    /// No query of this reader is in flight: answer the deleter's request, if new.
    fn acknowledge(&mut self) {
        let live = self.live;
        let r = live.deleter.request.load(Acquire);
        if r != self.seen {
            self.seen = r;
            live.ack.store(r, Release);
            live.wake_deleter();
        }
    }

    /// Pick up to 10 distinct live ids uniformly, padding with `ABSENT_ID`; returns
    /// how many rows the query must find. Call `end_query` after the query.
    pub fn begin_query(&mut self, rng: &mut impl Rng, ids: &mut [i64; 10]) -> u64 {
        self.acknowledge();
        let live = self.live;
        let h = live.deleter.horizon.load(Acquire);
        let max = live.max.load(Acquire);
        // After max: the holes of the inserts up to it are in this generation.
        let gen = live.holes_gen.load(Acquire);
        if gen != self.gen {
            self.holes = live.holes.lock().unwrap().clone();
            self.gen = gen;
        }
        let holes = &self.holes[..];
        let live = live_count(h, max, holes);
        ids.fill(ABSENT_ID);
        if live <= 10 {
            for i in 0..live as usize {
                ids[i] = nth_live_after(if i == 0 { h } else { ids[i - 1] }, 1, holes);
            }
        } else {
            for i in 0..10 {
                ids[i] = loop {
                    let id = nth_live_after(h, rng.gen_range(1..=live), holes);
                    if !ids[..i].contains(&id) {
                        break id;
                    }
                };
            }
        }
        live.min(10) as u64
    }

    pub fn end_query(&mut self) {
        self.acknowledge();
    }
}

impl Drop for LiveReader<'_> {
    fn drop(&mut self) {
        self.live.ack.store(GONE, Release);
        self.live.wake_deleter();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use std::time::Instant;

    #[test]
    fn picks_distinct_ids_in_the_live_range() {
        let live = LiveIds::new(Some((101, 200)), vec![]);
        let mut q = live.reader();
        let mut rng = SmallRng::seed_from_u64(1);
        let mut ids = [0; 10];
        for _ in 0..100 {
            assert_eq!(q.begin_query(&mut rng, &mut ids), 10);
            q.end_query();
            let mut sorted = ids.to_vec();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), 10);
            assert!(ids.iter().all(|&id| (101..=200).contains(&id)));
        }
    }

    #[test]
    fn small_ranges_pad_with_absent_ids() {
        let live = LiveIds::new(Some((5, 7)), vec![]);
        let mut ids = [0; 10];
        let expected = live
            .reader()
            .begin_query(&mut SmallRng::seed_from_u64(1), &mut ids);
        assert_eq!(expected, 3);
        assert_eq!(&ids[..4], &[5, 6, 7, ABSENT_ID]);
    }

    #[test]
    fn deletes_move_the_horizon_and_inserts_the_max() {
        let live = LiveIds::new(Some((1, 20)), vec![]);
        let stop = AtomicBool::new(false);
        // No reader is in a query (it ended): deletes do not wait.
        drop(live.reader());
        let old = live.begin_delete(15, &stop);
        live.end_delete(old, Some(15));
        live.inserted(5, None);
        let mut ids = [0; 10];
        {
            let mut q = live.reader();
            assert_eq!(q.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids), 10);
            assert!(ids.iter().all(|&id| (16..=25).contains(&id)));
            q.end_query();
        }
        // A failed delete gives the horizon back.
        let old = live.begin_delete(3, &stop);
        live.end_delete(old, None);
        assert_eq!(live.deleter.horizon.load(Relaxed), 15);
    }

    #[test]
    fn holes_are_never_picked_and_deletes_skip_them() {
        // ids 1..=10 and 20..=25 exist; an insert then skips 26..=29 and ends at 31.
        let live = LiveIds::new(Some((1, 25)), vec![(11, 19)]);
        let mut q = live.reader();
        live.inserted(2, Some(31));
        let mut ids = [0; 10];
        let mut rng = SmallRng::seed_from_u64(5);
        for _ in 0..50 {
            assert_eq!(q.begin_query(&mut rng, &mut ids), 10);
            q.end_query();
            assert!(ids
                .iter()
                .all(|&id| (1..=10).contains(&id) || (20..=25).contains(&id) || id >= 30));
        }
        drop(q);
        let stop = AtomicBool::new(false);
        let old = live.begin_delete(12, &stop); // deletes 1..=10, 20, 21
        live.end_delete(old, Some(12));
        let mut q = live.reader();
        assert_eq!(q.begin_query(&mut rng, &mut ids), 6);
        assert_eq!(ids[..7], [22, 23, 24, 25, 30, 31, ABSENT_ID]);
        q.end_query();
        assert_eq!(live.holes.lock().unwrap().len(), 1);
    }

    #[test]
    fn empty_tables_learn_their_ids_from_inserts() {
        let live = LiveIds::new(None, vec![]);
        let mut q = live.reader();
        let mut ids = [0; 10];
        assert_eq!(q.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids), 0);
        assert!(ids.iter().all(|&id| id == ABSENT_ID));
        q.end_query();
        live.inserted(3, Some(102));
        assert_eq!(q.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids), 3);
        assert_eq!(ids[..4], [100, 101, 102, ABSENT_ID]);
    }

    #[test]
    fn a_delete_waits_for_the_query_in_flight() {
        let live = LiveIds::new(Some((1, 1000)), vec![]);
        let stop = AtomicBool::new(false);
        let mut q = live.reader();
        let mut ids = [0; 10];
        q.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids);
        std::thread::scope(|s| {
            let deleter = s.spawn(|| {
                let old = live.begin_delete(100, &stop);
                live.end_delete(old, Some(100));
                Instant::now()
            });
            std::thread::sleep(Duration::from_millis(100));
            assert!(
                !deleter.is_finished(),
                "the delete did not wait for the query"
            );
            let query_end = Instant::now();
            q.end_query();
            let deleted_at = deleter.join().unwrap();
            assert!(deleted_at >= query_end);
            assert!(
                deleted_at - query_end < WAIT,
                "the deleter was not woken: {:?}",
                deleted_at - query_end
            );
        });
        // The next query sees the new horizon.
        q.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids);
        assert!(ids.iter().all(|&id| id > 100));
    }

    #[test]
    fn queries_back_to_back_never_pick_deleted_ids() {
        // The reader checks every id it picked against what the deleter has deleted
        // (its horizon once the delete ended) while the delete cannot have happened.
        let live = LiveIds::new(Some((1, 100_000)), vec![]);
        let stop = AtomicBool::new(false);
        let deleted_up_to = AtomicI64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..200 {
                    let old = live.begin_delete(50, &stop);
                    deleted_up_to.store(old + 50, Release);
                    live.end_delete(old, Some(50));
                }
                stop.store(true, Release);
            });
            let mut q = live.reader();
            let mut rng = SmallRng::seed_from_u64(9);
            let mut ids = [0; 10];
            let mut queries = 0;
            while !stop.load(Acquire) {
                q.begin_query(&mut rng, &mut ids);
                let lowest = *ids.iter().min().unwrap();
                assert!(
                    lowest > deleted_up_to.load(Acquire),
                    "id {lowest} was deleted"
                );
                q.end_query();
                queries += 1;
            }
            assert!(queries > 0);
        });
    }

    #[test]
    fn a_waiting_delete_ends_with_the_step() {
        let live = LiveIds::new(Some((1, 1000)), vec![]);
        let mut q = live.reader();
        q.begin_query(&mut SmallRng::seed_from_u64(1), &mut [0; 10]);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let deleter = s.spawn(|| live.begin_delete(10, &stop));
            std::thread::sleep(Duration::from_millis(20));
            stop.store(true, Relaxed);
            assert_eq!(deleter.join().unwrap(), 0);
        });
    }
}
