//! Pacing (when may the next operation start) and stopping (when is the work done) are
//! independent, as in oha: any pacing combines with any stop rule.
//!
//! Under a target rate every operation has an intended start time on a fixed schedule;
//! latency is measured from it, so a stall that delays later operations is charged to
//! them (coordinated omission, as wrk2 and oha do).
//!
//! Every instant here is the step's own time (clock.rs): a step run in slices keeps its
//! schedule and deadline across the pauses, with no burst to catch up after one.

use crate::clock::StepClock;
use std::time::{Duration, Instant};

/// When the next operation may start.
#[derive(Debug, Clone)]
pub enum Pacing {
    /// As fast as possible: each operation is intended to start when the previous ended.
    ClosedLoop,
    /// Operation k is intended to start at `start + k * period`.
    Rate {
        start: Instant,
        period: Duration,
        issued: u64,
    },
}

impl Pacing {
    /// `units_per_op` units (rows) per operation at `units_per_s`; 0 means closed loop.
    pub fn rate(start: Instant, units_per_op: u64, units_per_s: u64) -> Pacing {
        if units_per_s == 0 {
            return Pacing::ClosedLoop;
        }
        let period = Duration::from_secs_f64(units_per_op as f64 / units_per_s as f64);
        Pacing::Rate {
            start,
            period,
            issued: 0,
        }
    }

    /// The intended start of the next operation; `now` for a closed loop.
    pub fn next_intended(&mut self, now: Instant) -> Instant {
        match self {
            Pacing::ClosedLoop => now,
            Pacing::Rate {
                start,
                period,
                issued,
            } => {
                let offset = period.as_nanos().saturating_mul(*issued as u128);
                let at = *start + Duration::from_nanos(offset.min(u64::MAX as u128) as u64);
                *issued += 1;
                at
            }
        }
    }
}

/// When the work is done.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    /// After this many units (rows) in total.
    Units(u64),
    /// No operation intended to start at or after the deadline is issued.
    Deadline(Instant),
}

impl Stop {
    /// May an operation intended at `intended` start, with `done` units finished?
    pub fn allows(&self, intended: Instant, done: u64) -> bool {
        match *self {
            Stop::Units(n) => done < n,
            Stop::Deadline(d) => intended < d,
        }
    }

    /// How many units the next operation may carry, at most `batch`.
    pub fn next_batch(&self, batch: u64, done: u64) -> u64 {
        match *self {
            Stop::Units(n) => batch.min(n.saturating_sub(done)),
            Stop::Deadline(_) => batch,
        }
    }
}

/// Sleep until `at` on `clock` (which stands still while the step is paused), waking
/// early if `stop` turns true; false when stopped.
pub fn sleep_until(at: Instant, stop: &std::sync::atomic::AtomicBool, clock: &StepClock) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    const SLICE: Duration = Duration::from_millis(50);
    loop {
        if stop.load(Relaxed) {
            return false;
        }
        let now = clock.now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(SLICE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn rate_schedule_is_fixed_from_the_start() {
        let t0 = Instant::now();
        let mut p = Pacing::rate(t0, 10, 100); // 10 rows per op at 100 rows/s: every 100 ms
        assert_eq!(p.next_intended(t0), t0);
        assert_eq!(p.next_intended(t0), t0 + Duration::from_millis(100));
        // Falling behind does not move the schedule: the late op keeps its intended start.
        let late = t0 + Duration::from_secs(5);
        assert_eq!(p.next_intended(late), t0 + Duration::from_millis(200));
    }

    #[test]
    fn closed_loop_starts_now() {
        let now = Instant::now();
        let mut p = Pacing::rate(now, 10, 0);
        assert!(matches!(p, Pacing::ClosedLoop));
        assert_eq!(
            p.next_intended(now + Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }

    #[test]
    fn stop_rules_are_independent_of_pacing() {
        let t0 = Instant::now();
        let units = Stop::Units(25);
        assert!(units.allows(t0 + Duration::from_secs(99), 20));
        assert!(!units.allows(t0, 25));
        assert_eq!(units.next_batch(10, 20), 5);
        let deadline = Stop::Deadline(t0 + Duration::from_secs(1));
        assert!(deadline.allows(t0, 1_000_000));
        assert!(!deadline.allows(t0 + Duration::from_secs(1), 0));
        assert_eq!(deadline.next_batch(10, 20), 10);
    }

    #[test]
    fn sleep_until_honours_stop() {
        let (stop, clock) = (AtomicBool::new(true), StepClock::new());
        assert!(!sleep_until(
            Instant::now() + Duration::from_secs(60),
            &stop,
            &clock
        ));
        let go = AtomicBool::new(false);
        assert!(sleep_until(
            Instant::now() + Duration::from_millis(5),
            &go,
            &clock
        ));
    }

    #[test]
    fn sleep_until_sleeps_in_own_time_across_a_pause() {
        let (go, clock) = (AtomicBool::new(false), StepClock::new());
        let t0 = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(10));
                clock.freeze();
                std::thread::sleep(Duration::from_millis(100));
                clock.resume();
            });
            assert!(sleep_until(t0 + Duration::from_millis(40), &go, &clock));
        });
        // 40 ms of own time: 10 before the pause, 100 paused, 30 after.
        let wall = t0.elapsed();
        assert!(wall >= Duration::from_millis(140), "{wall:?}");
    }
}
