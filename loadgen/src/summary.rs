//! The end of a step, the runner's last part: check what the clients left behind
//! (row counts, point-query rows), then print the summary of the measured window.

use crate::context::StepContext;
use crate::engine_stats::{EngineSnapshot, EngineStats};
use crate::outcome::{ClientOutcome, StepPlan};
use crate::output::{self, Checks, Event, OpSummary, Summary};
use crate::reporter::Reported;
use crate::stats;
use crate::timeline::Mark;
use anyhow::{bail, Result};
use std::time::Duration;

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
    let after = reported.engine_after.clone();
    let engine_stats = engine_stats(ctx, elapsed, reported.engine_before.as_ref(), after)?;
    let done = Mark::now();
    let window_engine_stats = ctx.window.as_ref().and_then(|w| w.engine_stats());
    let window_skip_ops = ctx.window.as_ref().map(|w| w.skip_ops());
    let summary = Summary {
        engine_stats,
        window_engine_stats,
        window_skip_ops,
        elapsed_s: elapsed.as_secs_f64(),
        q_op: plan.q_op,
        q_unit: plan.q_unit,
        ops,
        checks,
        process: done.usage,
        phases: reported.timeline.phases(&done),
    };
    output::emit(&Event::Summary(Box::new(summary)));
    Ok(())
}

/// Deltas of the engine's counters over the measured window: to `after` (a SQL
/// engine's, read when the timed part ended), else to now.
fn engine_stats(
    ctx: &StepContext,
    elapsed: Duration,
    before: Option<&EngineSnapshot>,
    after: Option<EngineSnapshot>,
) -> Result<Option<EngineStats>> {
    let after = match after {
        Some(after) => after,
        None => match ctx.engine_snapshot()? {
            Some(after) => after,
            None => return Ok(None),
        },
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
