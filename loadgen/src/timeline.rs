//! The boundaries of a step's phases: when each was crossed, and what this process had
//! spent by then (getrusage), so the summary can tell setup, warm-up, the measured
//! window and the checks apart.

use crate::output::{Phase, Phases, ProcessUsage};
use std::time::{Duration, Instant};

/// One boundary: when, and this process's usage then.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    pub at: Instant,
    pub usage: ProcessUsage,
}

impl Mark {
    pub fn now() -> Mark {
        Mark {
            usage: ProcessUsage::now(),
            at: Instant::now(),
        }
    }

    /// This mark's usage with another instant: a boundary fixed in advance (the end
    /// of the warm-up) whose usage is read when the reporter gets there.
    pub fn at(self, at: Instant) -> Mark {
        Mark { at, ..self }
    }
}

/// The boundaries of one step, in order. Between `ready` and `go`, and between
/// `stopped` and `check`, the loadgen only waits for its caller: no phase counts it.
/// `go`, `measuring` and `end` are the step's own time (clock.rs: the pauses between
/// slices left out; wall time without slices, and at go either way).
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    /// The process started; its usage was zero then.
    pub launched: Instant,
    /// Every client was set up.
    pub ready: Mark,
    /// `go`: the step's t = 0.
    pub go: Mark,
    /// The measured window began: go + the warm-up.
    pub measuring: Mark,
    /// The last timed operation ended.
    pub end: Instant,
    /// `stopped` was printed.
    pub stopped: Mark,
    /// The checks began.
    pub check: Mark,
}

impl Timeline {
    /// The measured window: its start to the last timed operation's end.
    pub fn elapsed(&self) -> Duration {
        self.end.saturating_duration_since(self.measuring.at)
    }

    /// The step's phases, the checks ending at `done`.
    pub fn phases(&self, done: &Mark) -> Phases {
        let launched = Mark {
            at: self.launched,
            usage: ProcessUsage::default(),
        };
        Phases {
            setup: phase(&launched, &self.ready),
            warmup: phase(&self.go, &self.measuring),
            measured: Phase {
                wall_s: self.elapsed().as_secs_f64(),
                process: self.stopped.usage.since(&self.measuring.usage),
            },
            checks: phase(&self.check, done),
        }
    }
}

fn phase(from: &Mark, to: &Mark) -> Phase {
    Phase {
        wall_s: to.at.saturating_duration_since(from.at).as_secs_f64(),
        process: to.usage.since(&from.usage),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(at: Instant, cpu_s: f64) -> Mark {
        let usage = ProcessUsage {
            user_s: cpu_s,
            ..ProcessUsage::default()
        };
        Mark { at, usage }
    }

    #[test]
    fn phases_are_differences_between_boundaries() {
        let t0 = Instant::now();
        let s = |secs: f64| t0 + Duration::from_secs_f64(secs);
        let tl = Timeline {
            launched: t0,
            ready: mark(s(1.0), 0.5),
            go: mark(s(1.5), 0.5),
            measuring: mark(s(3.5), 1.0),
            end: s(13.5),
            stopped: mark(s(13.6), 9.0),
            check: mark(s(14.0), 9.0),
        };
        let p = tl.phases(&mark(s(14.5), 9.25));
        assert_eq!(tl.elapsed(), Duration::from_secs(10));
        assert_eq!((p.setup.wall_s, p.setup.process.user_s), (1.0, 0.5));
        assert_eq!((p.warmup.wall_s, p.warmup.process.user_s), (2.0, 0.5));
        assert_eq!((p.measured.wall_s, p.measured.process.user_s), (10.0, 8.0));
        assert_eq!((p.checks.wall_s, p.checks.process.user_s), (0.5, 0.25));
    }
}
