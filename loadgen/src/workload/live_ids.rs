//! Which primary keys of one table are surely alive, so point queries can check their
//! results. Ids are contiguous (one inserter per table, auto-increment); the live ids
//! are `(horizon, max]`.
//!
//! The deleter moves the horizon *before* it deletes, then waits until no point query
//! still relies on the old horizon: the query thread publishes the horizon it picked
//! ids above (`floor`) and re-reads the horizon afterwards. Both sides use SeqCst, so
//! either the query sees the new horizon or the deleter sees the query's floor.

use rand::Rng;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::SeqCst};
use std::sync::RwLock;
use std::time::Duration;

const IDLE: i64 = i64::MAX;

/// A key no auto-increment table holds; pads a point query with fewer live ids.
pub const ABSENT_ID: i64 = -1;

pub struct LiveIds {
    horizon: AtomicI64,
    max: AtomicI64,
    floor: AtomicI64,
    /// Inclusive ranges of ids that do not exist, sorted: values an auto-increment
    /// skipped (failed inserts, a crash). Usually empty.
    holes: RwLock<Vec<(i64, i64)>>,
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
            horizon: AtomicI64::new(min - 1),
            max: AtomicI64::new(max),
            floor: AtomicI64::new(IDLE),
            holes: RwLock::new(holes),
        }
    }

    /// The inserter committed `rows` rows, the largest id being `last_id` when known.
    pub fn inserted(&self, rows: u64, last_id: Option<i64>) {
        let max = self.max.load(SeqCst);
        match last_id {
            Some(last) if rows > 0 => {
                let first = last - rows as i64 + 1;
                if first > max + 1 {
                    self.holes.write().unwrap().push((max + 1, first - 1));
                }
                self.max.store(last, SeqCst);
            }
            _ => self.max.store(max + rows as i64, SeqCst),
        }
    }

    /// Called by the deleter before deleting the `n` oldest rows; returns the old horizon.
    pub fn begin_delete(&self, n: u64, stop: &AtomicBool) -> i64 {
        let old = self.horizon.load(SeqCst);
        let new = {
            let holes = self.holes.read().unwrap();
            if live_count(old, self.max.load(SeqCst), &holes) > n as i64 {
                nth_live_after(old, n as i64, &holes)
            } else {
                IDLE - 1 // the delete may reach rows committed meanwhile: trust none
            }
        };
        self.horizon.store(new, SeqCst);
        let mut spins = 0u32;
        while self.floor.load(SeqCst) < new && !stop.load(SeqCst) {
            spins += 1;
            if spins < 100 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        old
    }

    /// The delete ended having removed `deleted` rows (None after an error).
    pub fn end_delete(&self, old: i64, deleted: Option<u64>) {
        let mut holes = self.holes.write().unwrap();
        let h = nth_live_after(old, deleted.unwrap_or(0) as i64, &holes);
        holes.retain(|&(_, hi)| hi > h);
        self.horizon.store(h, SeqCst);
    }

    /// Pick up to 10 distinct live ids uniformly, padding with `ABSENT_ID`; returns
    /// how many rows the query must find. Call `end_query` after the query.
    pub fn begin_query(&self, rng: &mut impl Rng, ids: &mut [i64; 10]) -> u64 {
        let mut h = self.horizon.load(SeqCst);
        loop {
            self.floor.store(h, SeqCst);
            let again = self.horizon.load(SeqCst);
            if again == h {
                break;
            }
            h = again;
        }
        let holes = self.holes.read().unwrap();
        let live = live_count(h, self.max.load(SeqCst), &holes);
        ids.fill(ABSENT_ID);
        if live <= 10 {
            for i in 0..live as usize {
                ids[i] = nth_live_after(if i == 0 { h } else { ids[i - 1] }, 1, &holes);
            }
        } else {
            for i in 0..10 {
                ids[i] = loop {
                    let id = nth_live_after(h, rng.gen_range(1..=live), &holes);
                    if !ids[..i].contains(&id) {
                        break id;
                    }
                };
            }
        }
        live.min(10) as u64
    }

    pub fn end_query(&self) {
        self.floor.store(IDLE, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn picks_distinct_ids_in_the_live_range() {
        let live = LiveIds::new(Some((101, 200)), vec![]);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut ids = [0; 10];
        for _ in 0..100 {
            assert_eq!(live.begin_query(&mut rng, &mut ids), 10);
            live.end_query();
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
        let expected = live.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids);
        assert_eq!(expected, 3);
        assert_eq!(&ids[..4], &[5, 6, 7, ABSENT_ID]);
    }

    #[test]
    fn deletes_move_the_horizon_and_inserts_the_max() {
        let live = LiveIds::new(Some((1, 20)), vec![]);
        let stop = AtomicBool::new(false);
        let old = live.begin_delete(15, &stop);
        live.end_delete(old, Some(15));
        live.inserted(5, None);
        let mut ids = [0; 10];
        assert_eq!(
            live.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids),
            10
        );
        assert!(ids.iter().all(|&id| (16..=25).contains(&id)));
        live.end_query();
        // A failed delete gives the horizon back.
        let old = live.begin_delete(3, &stop);
        live.end_delete(old, None);
        assert_eq!(live.horizon.load(SeqCst), 15);
    }

    #[test]
    fn holes_are_never_picked_and_deletes_skip_them() {
        // ids 1..=10 and 20..=25 exist; an insert then skips 26..=29 and ends at 31.
        let live = LiveIds::new(Some((1, 25)), vec![(11, 19)]);
        live.inserted(2, Some(31));
        let mut ids = [0; 10];
        let mut rng = SmallRng::seed_from_u64(5);
        for _ in 0..50 {
            assert_eq!(live.begin_query(&mut rng, &mut ids), 10);
            live.end_query();
            assert!(ids
                .iter()
                .all(|&id| (1..=10).contains(&id) || (20..=25).contains(&id) || id >= 30));
        }
        let stop = AtomicBool::new(false);
        let old = live.begin_delete(12, &stop); // deletes 1..=10, 20, 21
        live.end_delete(old, Some(12));
        assert_eq!(live.begin_query(&mut rng, &mut ids), 6);
        assert_eq!(ids[..7], [22, 23, 24, 25, 30, 31, ABSENT_ID]);
        live.end_query();
        assert_eq!(live.holes.read().unwrap().len(), 1);
    }

    #[test]
    fn empty_tables_learn_their_ids_from_inserts() {
        let live = LiveIds::new(None, vec![]);
        let mut ids = [0; 10];
        assert_eq!(
            live.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids),
            0
        );
        assert!(ids.iter().all(|&id| id == ABSENT_ID));
        live.end_query();
        live.inserted(3, Some(102));
        assert_eq!(
            live.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids),
            3
        );
        assert_eq!(ids[..4], [100, 101, 102, ABSENT_ID]);
    }
}
