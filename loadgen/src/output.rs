//! The event stream (schema/events.schema.json): JSON lines on stdout, one write and
//! flush per line so a reader sees each event as it happens.

use crate::engine_stats::EngineStats;
use crate::stats::{Counts, OpKind, Percentiles};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const EVENT_VERSION: u32 = 2;

/// Error lines printed per op kind before only counts are kept.
const ERRORS_PRINTED_PER_KIND: u64 = 5;

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Event<'a> {
    Start {
        event_version: u32,
        loadgen_version: &'a str,
        driver: &'a str,
        step: &'a str,
        clients: u32,
        pid: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        capabilities: Option<Vec<&'a str>>,
    },
    /// Every client is set up; with the handshake, the loadgen now waits for `go`.
    Ready {
        process: ProcessUsage,
        /// The server processes serving the clients' sessions, where the engine runs
        /// one per session (PostgreSQL).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        server_pids: Vec<u32>,
    },
    Interval {
        t_s: f64,
        ops: BTreeMap<OpKind, IntervalOps>,
    },
    /// The warm-up is over (or there is none): the measured window begins.
    Measuring {
        t_s: f64,
        process: ProcessUsage,
    },
    /// A profiler's window (the spec's `window`) opens or closes: no Q call is in
    /// flight; the loadgen waits for the line `open` or `close`. At the close, `ops` and
    /// `rows` are what the Q calls inside the window did.
    Window {
        edge: &'a str,
        t_s: f64,
        ops: u64,
        rows: u64,
    },
    /// A step run in slices (the spec's `slices`): after go (n 0), and after each slice
    /// once no driver call is in flight, the loadgen waits for the line `run`; the last
    /// slice (`last`, when the timed work ended in it) comes just before `stopped` and
    /// waits for nothing. Times are the step's own (pauses left out).
    Slice {
        n: u64,
        /// Own seconds since go, at the slice's end.
        t_s: f64,
        /// Own seconds from `run` to the end of the slice's last call.
        slice_s: f64,
        /// Units of Q (the summary's q_unit) ended in the slice and counted in the
        /// summary (after the warm-up).
        q: u64,
        /// Units of Q ended in the slice, warm-up included.
        q_all: u64,
        last: bool,
        process: ProcessUsage,
    },
    /// The last timed operation ended; with the handshake, the loadgen now waits for
    /// `check` before its checks.
    Stopped {
        t_s: f64,
        elapsed_s: f64,
        process: ProcessUsage,
    },
    Error {
        t_s: f64,
        op: OpKind,
        class: ErrorClass,
        message: &'a str,
    },
    Summary(Box<Summary>),
    Fatal {
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        op: Option<OpKind>,
    },
}

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ErrorClass {
    /// Counted and carried on; a fatal error ends the step with a `fatal` event instead.
    Ignorable,
}

#[derive(Serialize)]
pub struct IntervalOps {
    pub ops: u64,
    pub rows: u64,
    pub max_us: u64,
    pub errors: u64,
}

impl From<Counts> for IntervalOps {
    fn from(c: Counts) -> Self {
        IntervalOps {
            ops: c.ops,
            rows: c.rows,
            max_us: c.max_us,
            errors: c.errors,
        }
    }
}

#[derive(Serialize)]
pub struct Summary {
    pub elapsed_s: f64,
    pub q_op: OpKind,
    pub q_unit: QUnit,
    pub ops: BTreeMap<OpKind, OpSummary>,
    pub checks: Checks,
    pub process: ProcessUsage,
    pub phases: Phases,
    /// What the engine says about itself over the measured window: an embedded
    /// engine's statistics (kv steps), a SQL engine's buffer counters (engine_stats.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_stats: Option<EngineStats>,
    /// With the spec's `window`: the same over the window's Q calls (counters read
    /// while the calls wait at its edges; reporter.rs says on which side).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_engine_stats: Option<EngineStats>,
    /// With the spec's `window`: the Q calls before its open (skip_ops, or fewer when
    /// a probe found the cache warm first: until_hit_rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_skip_ops: Option<u64>,
}

/// Wall time and this process's usage in each phase of the step.
#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct Phases {
    /// Process start to `ready`: connections, statements, tables, an engine's open.
    pub setup: Phase,
    /// `go` to `measuring`.
    pub warmup: Phase,
    /// `measuring` to the last timed operation's end (usage: to `stopped`).
    pub measured: Phase,
    /// `check` (or `stopped`, without the handshake) to the summary.
    pub checks: Phase,
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq)]
pub struct Phase {
    pub wall_s: f64,
    pub process: ProcessUsage,
}

/// What this process has spent so far, from getrusage(2): microsecond resolution, where
/// /proc's clock ticks (10 ms) would round a short step's client CPU to zero.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct ProcessUsage {
    pub user_s: f64,
    pub system_s: f64,
    pub voluntary_cs: u64,
    pub involuntary_cs: u64,
}

impl ProcessUsage {
    pub fn now() -> Self {
        // SAFETY: getrusage only writes into the zeroed struct we pass it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        ProcessUsage {
            user_s: secs(ru.ru_utime),
            system_s: secs(ru.ru_stime),
            voluntary_cs: ru.ru_nvcsw as u64,
            involuntary_cs: ru.ru_nivcsw as u64,
        }
    }

    /// What was spent from `earlier` to this.
    pub fn since(&self, earlier: &ProcessUsage) -> ProcessUsage {
        ProcessUsage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
            voluntary_cs: self.voluntary_cs.saturating_sub(earlier.voluntary_cs),
            involuntary_cs: self.involuntary_cs.saturating_sub(earlier.involuntary_cs),
        }
    }
}

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum QUnit {
    Rows,
    Ops,
}

#[derive(Serialize)]
pub struct OpSummary {
    pub ops: u64,
    pub rows: u64,
    pub errors: u64,
    pub target_rows_per_s: Option<f64>,
    pub latency_us: Percentiles,
    pub histogram: String,
}

#[derive(Serialize, Default, Debug, Clone, PartialEq)]
pub struct Checks {
    pub rows_expected: Option<u64>,
    pub rows_found: Option<u64>,
    pub point_rows_expected: u64,
    pub point_rows_found: u64,
}

/// Print one event as one line and flush it.
pub fn emit(event: &Event) {
    let mut line = serde_json::to_vec(event).expect("events serialize");
    line.push(b'\n');
    let mut out = std::io::stdout().lock();
    // A closed stdout means nobody listens; the process ends on its own soon after.
    let _ = out.write_all(&line).and_then(|_| out.flush());
}

pub fn fatal(message: &str, op: Option<OpKind>) {
    emit(&Event::Fatal { message, op });
}

/// Prints the first few ignorable errors of each kind; the rest are only counted.
#[derive(Default)]
pub struct ErrorLimiter {
    printed: [AtomicU64; OpKind::COUNT],
}

impl ErrorLimiter {
    pub fn report(&self, t_s: f64, op: OpKind, message: &str) {
        let n = self.printed[op as usize].fetch_add(1, Relaxed);
        if n < ERRORS_PRINTED_PER_KIND {
            emit(&Event::Error {
                t_s,
                op,
                class: ErrorClass::Ignorable,
                message,
            });
        } else if n == ERRORS_PRINTED_PER_KIND {
            let note = format!("{message} (further {} errors are only counted)", op.name());
            emit(&Event::Error {
                t_s,
                op,
                class: ErrorClass::Ignorable,
                message: &note,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_their_type_tag() {
        let e = Event::Fatal {
            message: "boom",
            op: Some(OpKind::PointQuery),
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "fatal", "message": "boom", "op": "point_query"})
        );
        let mut ops = BTreeMap::new();
        ops.insert(
            OpKind::Insert,
            IntervalOps::from(Counts {
                ops: 1,
                rows: 2,
                errors: 0,
                max_us: 3,
            }),
        );
        let v = serde_json::to_value(Event::Interval { t_s: 1.0, ops }).unwrap();
        assert_eq!(v["ops"]["insert"]["rows"], 2);
        assert_eq!(v["type"], "interval");
    }
}
