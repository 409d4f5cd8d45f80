//! Workloads speak only to the driver traits. A workload plans a step (which op kinds,
//! which is the step's Q), runs one client, and the runner summarizes.

mod insert;
mod kv;
mod kv_data;
mod kv_loops;
mod live_ids;
mod micro;
mod micro_gen;
mod micro_ops;
mod rows;

use crate::driver::kv::{EngineSnapshot, EngineStats};
use crate::driver::Conn;
use crate::output::{Checks, Event, OpSummary, QUnit, Summary};
use crate::reporter::Reported;
use crate::runner::StepContext;
use crate::spec::{Step, StepSpec, Workload};
use crate::stats::{self, OpKind};
use crate::timeline::Mark;
use anyhow::{bail, Result};
use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

/// Run client `client` (1-based) of the spec's workload.
pub fn run_client(ctx: &StepContext, client: u32) -> Result<ClientOutcome> {
    match ctx.spec.workload {
        Workload::Insert => insert::run_client(ctx, client),
        Workload::Micro => micro::run_client(ctx, client),
        Workload::Kv => kv::run_client(ctx, client),
    }
}

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
    fn expected(&self) -> u64 {
        (self.before + self.inserted).saturating_sub(self.deleted)
    }
}

/// What one client leaves behind.
pub struct ClientOutcome {
    pub table: String,
    /// When its last timed operation ended.
    pub end: Instant,
    pub histograms: Vec<Vec<Option<Histogram<u64>>>>,
    /// Kept open until the process ends (wait_before_close).
    pub conns: Vec<Box<dyn Conn>>,
    /// The table's row count, when the step checks it.
    pub rows: Option<RowCheck>,
    /// Rows point queries had to find, and found.
    pub point_rows: (u64, u64),
}

pub fn plan(spec: &StepSpec) -> StepPlan {
    match spec.workload {
        Workload::Insert => insert_plan(spec),
        Workload::Kv => kv::plan(spec),
        Workload::Micro => micro::plan(spec),
    }
}

fn insert_plan(spec: &StepSpec) -> StepPlan {
    let rate = spec.insert.insert_rate.unwrap_or(0);
    let writers = if rate > 0 {
        vec![OpKind::Insert, OpKind::Delete]
    } else {
        vec![]
    };
    let target = (rate * spec.clients as u64) as f64;
    let targets = writers.iter().map(|&k| (k, target)).collect();
    let (q_op, q_unit, kinds) = match spec.step {
        Step::LoadI0 => (OpKind::Insert, QUnit::Rows, vec![OpKind::Insert]),
        Step::CreateIndexes => (OpKind::CreateIndex, QUnit::Rows, vec![OpKind::CreateIndex]),
        Step::LoadI1 | Step::LoadI2 => (
            OpKind::Insert,
            QUnit::Rows,
            vec![OpKind::Insert, OpKind::Delete],
        ),
        Step::Cleanup | Step::Micro(_) => (OpKind::Cleanup, QUnit::Ops, vec![OpKind::Cleanup]),
        Step::RangeQueries => (
            OpKind::RangeQuery,
            QUnit::Ops,
            [vec![OpKind::RangeQuery], writers].concat(),
        ),
        Step::PointQueries => (
            OpKind::PointQuery,
            QUnit::Ops,
            [vec![OpKind::PointQuery], writers].concat(),
        ),
        _ => unreachable!("the spec's validation pairs kv steps with the kv workload"),
    };
    let targets = if spec.step.is_query() {
        targets
    } else {
        vec![]
    };
    StepPlan {
        kinds,
        q_op,
        q_unit,
        targets,
    }
}

/// Check the step's results, then print the summary of its measured window; a failed
/// check is fatal.
pub fn summarize(ctx: &StepContext, plan: &StepPlan, reported: &Reported) -> Result<()> {
    let outcomes = &reported.outcomes;
    let elapsed = reported.timeline.elapsed();
    let checks = check(outcomes)?;
    let totals = ctx.stats.measured();
    let all = outcomes
        .iter()
        .flat_map(|o| o.histograms.iter().cloned())
        .collect();
    let merged = stats::merge(all);
    let ops = plan
        .kinds
        .iter()
        .map(|&k| {
            let t = totals[k as usize];
            let h = &merged[k as usize];
            let target = plan
                .targets
                .iter()
                .find(|(tk, _)| *tk == k)
                .map(|&(_, r)| r);
            let summary = OpSummary {
                ops: t.ops,
                rows: t.rows,
                errors: t.errors,
                target_rows_per_s: target,
                latency_us: stats::percentiles(h),
                histogram: stats::encode(h),
            };
            (k, summary)
        })
        .collect();
    let engine_stats = engine_stats(ctx, elapsed, reported.engine_before.as_ref())?;
    let done = Mark::now();
    let summary = Summary {
        engine_stats,
        elapsed_s: elapsed.as_secs_f64(),
        q_op: plan.q_op,
        q_unit: plan.q_unit,
        ops,
        checks,
        process: done.usage,
        phases: reported.timeline.phases(&done),
    };
    crate::output::emit(&Event::Summary(Box::new(summary)));
    Ok(())
}

/// Deltas of an embedded engine's counters over the measured window (kv workload only).
fn engine_stats(
    ctx: &StepContext,
    elapsed: Duration,
    before: Option<&EngineSnapshot>,
) -> Result<Option<EngineStats>> {
    let Some(after) = ctx.engine_snapshot()? else {
        return Ok(None);
    };
    let before = before.cloned().unwrap_or_default();
    Ok(Some(EngineStats::between(
        &before,
        &after,
        elapsed.as_secs_f64(),
    )))
}

fn check(outcomes: &[ClientOutcome]) -> Result<Checks> {
    let mut checks = Checks::default();
    let mut failures = Vec::new();
    for o in outcomes {
        if let Some(rc) = &o.rows {
            *checks.rows_expected.get_or_insert(0) += rc.expected();
            *checks.rows_found.get_or_insert(0) += rc.found;
            if rc.expected() != rc.found {
                failures.push(format!(
                    "{} holds {} rows, expected {} ({} before + {} inserted - {} deleted)",
                    o.table,
                    rc.found,
                    rc.expected(),
                    rc.before,
                    rc.inserted,
                    rc.deleted
                ));
            }
        }
        let (expected, found) = o.point_rows;
        checks.point_rows_expected += expected;
        checks.point_rows_found += found;
        if expected != found {
            failures.push(format!(
                "point queries on {} found {found} rows, expected {expected}",
                o.table
            ));
        }
    }
    if !failures.is_empty() {
        bail!("check failed: {}", failures.join("; "));
    }
    Ok(checks)
}
