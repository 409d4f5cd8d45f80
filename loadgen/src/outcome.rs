//! What a workload hands the runner: the plan of a step (which op kinds it measures,
//! which one is Q) and each client's outcome, for the reporter and the summary.

use crate::driver::Conn;
use crate::output::QUnit;
use crate::stats::OpKind;
use hdrhistogram::Histogram;
use std::time::Instant;

/// One thread's latency histograms, indexed by op kind (None for kinds it did not run).
pub type Histograms = Vec<Option<Histogram<u64>>>;

/// What a step measures: its op kinds, the one whose rate is Q, and paced targets.
pub struct StepPlan {
    pub kinds: Vec<OpKind>,
    pub q_op: OpKind,
    pub q_unit: QUnit,
    /// Target rows/s over all clients for paced kinds.
    pub targets: Vec<(OpKind, f64)>,
}

/// count(*) at the end must equal rows before + inserted - deleted.
pub struct RowCheck {
    pub before: u64,
    pub inserted: u64,
    pub deleted: u64,
    pub found: u64,
}

impl RowCheck {
    pub fn expected(&self) -> u64 {
        (self.before + self.inserted).saturating_sub(self.deleted)
    }
}

/// What one client leaves behind.
pub struct ClientOutcome {
    pub table: String,
    /// When its last timed operation ended (the step's own time).
    pub end: Instant,
    pub histograms: Vec<Histograms>,
    /// Kept open until the process ends (wait_before_close).
    pub conns: Vec<Box<dyn Conn>>,
    /// The table's row count, when the step checks it.
    pub rows: Option<RowCheck>,
    /// Rows point queries had to find, and found.
    pub point_rows: (u64, u64),
}
