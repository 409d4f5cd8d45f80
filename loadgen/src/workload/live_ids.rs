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
use std::time::Duration;

const IDLE: i64 = i64::MAX;

/// A key no auto-increment table holds; pads a point query with fewer live ids.
pub const ABSENT_ID: i64 = -1;

pub struct LiveIds {
    horizon: AtomicI64,
    max: AtomicI64,
    floor: AtomicI64,
    /// False once ids may have gaps (a failed insert may consume sequence values), or
    /// when the table was empty at the start and the next id is unknown.
    exact: AtomicBool,
}

impl LiveIds {
    /// From the table's smallest and largest id at the start of the step.
    pub fn new(bounds: Option<(i64, i64)>) -> LiveIds {
        let (min, max) = bounds.unwrap_or((1, 0));
        LiveIds {
            horizon: AtomicI64::new(min - 1),
            max: AtomicI64::new(max),
            floor: AtomicI64::new(IDLE),
            exact: AtomicBool::new(bounds.is_some()),
        }
    }

    /// The inserter committed `rows` more rows, or (None) an insert failed.
    pub fn inserted(&self, rows: Option<u64>) {
        match rows {
            Some(n) => {
                self.max.fetch_add(n as i64, SeqCst);
            }
            None => self.exact.store(false, SeqCst),
        }
    }

    /// Called by the deleter before deleting the `n` oldest rows; returns the old horizon.
    pub fn begin_delete(&self, n: u64, stop: &AtomicBool) -> i64 {
        let old = self.horizon.fetch_add(n as i64, SeqCst);
        let new = old + n as i64;
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
        self.horizon
            .store(old + deleted.unwrap_or(0) as i64, SeqCst);
    }

    /// Pick up to 10 distinct live ids, padding with `ABSENT_ID`; returns how many rows
    /// the query must find, or None when ids are no longer exact. Call `end_query` after.
    pub fn begin_query(&self, rng: &mut impl Rng, ids: &mut [i64; 10]) -> Option<u64> {
        let mut h = self.horizon.load(SeqCst);
        loop {
            self.floor.store(h, SeqCst);
            let again = self.horizon.load(SeqCst);
            if again == h {
                break;
            }
            h = again;
        }
        let (lo, hi) = (h + 1, self.max.load(SeqCst));
        let live = (hi - lo + 1).max(0) as u64;
        ids.fill(ABSENT_ID);
        if live <= 10 {
            for (slot, id) in ids.iter_mut().zip(lo..=hi) {
                *slot = id;
            }
        } else {
            for i in 0..10 {
                ids[i] = loop {
                    let id = rng.gen_range(lo..=hi);
                    if !ids[..i].contains(&id) {
                        break id;
                    }
                };
            }
        }
        self.exact.load(SeqCst).then_some(live.min(10))
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
        let live = LiveIds::new(Some((101, 200)));
        let mut rng = SmallRng::seed_from_u64(1);
        let mut ids = [0; 10];
        for _ in 0..100 {
            assert_eq!(live.begin_query(&mut rng, &mut ids), Some(10));
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
        let live = LiveIds::new(Some((5, 7)));
        let mut ids = [0; 10];
        let expected = live.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids);
        assert_eq!(expected, Some(3));
        assert_eq!(&ids[..4], &[5, 6, 7, ABSENT_ID]);
    }

    #[test]
    fn deletes_move_the_horizon_and_inserts_the_max() {
        let live = LiveIds::new(Some((1, 20)));
        let stop = AtomicBool::new(false);
        let old = live.begin_delete(15, &stop);
        live.end_delete(old, Some(15));
        live.inserted(Some(5));
        let mut ids = [0; 10];
        assert_eq!(
            live.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids),
            Some(10)
        );
        assert!(ids.iter().all(|&id| (16..=25).contains(&id)));
        live.end_query();
        // A failed delete gives the horizon back; a failed insert ends exact checking.
        let old = live.begin_delete(3, &stop);
        live.end_delete(old, None);
        live.inserted(None);
        assert_eq!(
            live.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids),
            None
        );
    }

    #[test]
    fn empty_tables_expect_nothing() {
        let live = LiveIds::new(None);
        let mut ids = [0; 10];
        assert_eq!(
            live.begin_query(&mut SmallRng::seed_from_u64(1), &mut ids),
            None
        );
        assert!(ids.iter().all(|&id| id == ABSENT_ID));
    }
}
