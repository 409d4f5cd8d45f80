//! The step spec's Insert Benchmark part: the `insert` and `cleanup` sections. Kept
//! apart from spec.rs, as the other workloads' sections are.

use crate::step::Step;
use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InsertSpec {
    /// l.i0, l.i1, l.i2: rows each client inserts (l.i1/l.i2 delete as many)
    pub rows: Option<u64>,
    /// Rows per insert statement and commit; defaults 100 (l.i0), 50 (l.i1), 5 (l.i2), 10 (q-steps)
    #[schemars(range(min = 1))]
    pub rows_per_commit: Option<u64>,
    /// q-steps: seconds to run
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub duration_s: Option<f64>,
    /// q-steps: background inserted rows/s per client, and deleted rows/s per client (0 = no
    /// background writes)
    pub insert_rate: Option<u64>,
    /// Rows each table holds before the step (one per client); when absent the loadgen
    /// counts them
    pub expected_rows: Option<Vec<u64>>,
    /// l.i1, l.i2: the inserter and the deleter behind it take turns (each insert batch
    /// waits until the rows inserted before it were deleted), so their sessions never
    /// run at once. For counting instructions (dbregress explain), where how the two
    /// overlap would otherwise change what each leaves the other
    #[serde(default)]
    pub lockstep: bool,
}

/// The post-write cleanup step
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CleanupSpec {
    #[serde(default = "default_statements_timeout_s")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub statements_timeout_s: f64,
}

pub fn default_statements_timeout_s() -> f64 {
    3600.0
}

impl InsertSpec {
    /// Which fields `step` needs and which it refuses; `clients` sizes expected_rows.
    pub fn validate(&self, step: Step, clients: u32) -> Result<()> {
        let name = step.name();
        match (step.is_load(), self.rows) {
            (true, None) => bail!("insert.rows is required for step {name}"),
            (false, Some(_)) => bail!("insert.rows does not apply to step {name}"),
            _ => {}
        }
        match (step.is_query(), self.duration_s, self.insert_rate) {
            (true, None, _) => bail!("insert.duration_s is required for step {name}"),
            (true, _, None) => {
                bail!("insert.insert_rate is required for step {name} (0 = no background writes)")
            }
            (true, Some(d), _) if !(d > 0.0 && d.is_finite()) => {
                bail!("insert.duration_s must be > 0, got {d}")
            }
            (false, Some(_), _) => bail!("insert.duration_s does not apply to step {name}"),
            (false, _, Some(_)) => bail!("insert.insert_rate does not apply to step {name}"),
            _ => {}
        }
        match (step.default_rows_per_commit(), self.rows_per_commit) {
            (_, Some(0)) => bail!("insert.rows_per_commit must be at least 1"),
            (None, Some(_)) => bail!("insert.rows_per_commit does not apply to step {name}"),
            _ => {}
        }
        if self.lockstep && !step.deletes_behind() {
            bail!("insert.lockstep does not apply to step {name} (only l.i1 and l.i2)");
        }
        if let Some(expected) = &self.expected_rows {
            if expected.len() != clients as usize {
                bail!(
                    "insert.expected_rows has {} entries, one per client is needed ({clients})",
                    expected.len(),
                );
            }
        }
        Ok(())
    }
}

impl CleanupSpec {
    pub fn validate(&self, step: Step) -> Result<()> {
        if step != Step::Cleanup {
            bail!("cleanup applies only to step cleanup, not {}", step.name());
        }
        let t = self.statements_timeout_s;
        if !(t > 0.0 && t.is_finite()) {
            bail!("cleanup.statements_timeout_s must be > 0, got {t}");
        }
        Ok(())
    }
}
