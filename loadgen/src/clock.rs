//! The step's own clock: wall time less the time the step spent paused between slices
//! (the spec's `slices`, slices.rs). While paused it stands still, so nothing inside the
//! step (its deadline, its warm-up's end, paced writers' schedules, latencies, the
//! events' t_s, elapsed_s) sees the pauses. Without slices it never pauses: `now` is
//! exactly `Instant::now()`.

use crate::stats::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// The state's top bit: the clock stands still at the own time in the other bits.
const FROZEN: u64 = 1 << 63;

pub struct StepClock {
    /// What the state's nanoseconds count from.
    base: Instant,
    /// One word, so a reader never sees half a change: 0, wall time; FROZEN | own
    /// nanoseconds since `base`, standing still there; else the nanoseconds paused so
    /// far, running (own = wall - them).
    state: CachePadded<AtomicU64>,
}

impl Default for StepClock {
    fn default() -> Self {
        StepClock::new()
    }
}

impl StepClock {
    pub fn new() -> StepClock {
        StepClock {
            base: Instant::now(),
            state: CachePadded(AtomicU64::new(0)),
        }
    }

    fn since_base(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// The step's own time now.
    pub fn now(&self) -> Instant {
        let s = self.state.load(SeqCst);
        if s == 0 {
            return Instant::now();
        }
        if s & FROZEN != 0 {
            return self.base + Duration::from_nanos(s & !FROZEN);
        }
        let wall = self.since_base(Instant::now());
        self.base + Duration::from_nanos(wall.saturating_sub(s))
    }

    /// Stand still at own time `at` (not before the clock's creation).
    pub fn freeze_at(&self, at: Instant) {
        self.state.store(FROZEN | self.since_base(at), SeqCst);
    }

    /// Stand still now.
    pub fn freeze(&self) {
        self.freeze_at(self.now());
    }

    /// Run again from where it stood: the pause just ended is added to the time paused.
    pub fn resume(&self) {
        let s = self.state.load(SeqCst);
        if s & FROZEN == 0 {
            return;
        }
        let own = s & !FROZEN;
        let paused = self.since_base(Instant::now()).saturating_sub(own);
        // At least 1: 0 would read as wall time, which it may no longer be.
        self.state.store(paused.max(1), SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn without_pauses_it_is_wall_time() {
        let c = StepClock::new();
        let (a, own, b) = (Instant::now(), c.now(), Instant::now());
        assert!(a <= own && own <= b);
    }

    #[test]
    fn it_stands_still_while_paused_and_runs_on_from_there() {
        let c = StepClock::new();
        std::thread::sleep(5 * MS);
        c.freeze();
        let stood = c.now();
        std::thread::sleep(30 * MS);
        assert_eq!(c.now(), stood, "no time passes while paused");
        c.resume();
        let after = c.now();
        assert!(
            after >= stood && after - stood < 5 * MS,
            "{:?}",
            after - stood
        );
        assert!(Instant::now() - c.now() >= 30 * MS, "the pause is left out");
        std::thread::sleep(20 * MS);
        let later = c.now() - stood;
        assert!(later >= 20 * MS && later < 30 * MS, "{later:?}");
        // A second pause adds to the first.
        c.freeze();
        std::thread::sleep(30 * MS);
        c.resume();
        let own = c.now() - stood;
        assert!(own >= 20 * MS && own < 35 * MS, "{own:?}");
        assert!(Instant::now() - c.now() >= 60 * MS);
    }

    #[test]
    fn it_can_stand_still_at_a_given_moment() {
        let c = StepClock::new();
        let go = Instant::now();
        std::thread::sleep(20 * MS);
        c.freeze_at(go);
        assert_eq!(c.now(), go);
        c.resume();
        assert!(c.now() - go < 5 * MS);
        c.resume(); // running: nothing to resume
        assert!(c.now() - go < 5 * MS);
    }
}
