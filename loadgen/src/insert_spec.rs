//! The Insert Benchmark's workload (docs/lab-file.md, Steps): its steps and its fields, with
//! their defaults, and the post-write cleanup's section, which the microbenchmarks share.
//! Kept apart from spec.rs, as the other workloads' parts are.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

// No doc comments on the serialized variants (nor on the other workloads' steps):
// schemars would turn the schema's plain `enum` of names into a `oneOf` of described
// constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum InsertStep {
    #[serde(rename = "l.i0")]
    LoadI0,
    #[serde(rename = "l.x")]
    CreateIndexes,
    #[serde(rename = "l.i1")]
    LoadI1,
    #[serde(rename = "l.i2")]
    LoadI2,
    #[serde(rename = "cleanup")]
    Cleanup,
    #[serde(rename = "qr")]
    RangeQueries,
    #[serde(rename = "qp")]
    PointQueries,
}

impl InsertStep {
    #[cfg(test)]
    pub const ALL: &'static [InsertStep] = &[
        InsertStep::LoadI0,
        InsertStep::CreateIndexes,
        InsertStep::LoadI1,
        InsertStep::LoadI2,
        InsertStep::Cleanup,
        InsertStep::RangeQueries,
        InsertStep::PointQueries,
    ];

    pub fn name(self) -> &'static str {
        match self {
            InsertStep::LoadI0 => "l.i0",
            InsertStep::CreateIndexes => "l.x",
            InsertStep::LoadI1 => "l.i1",
            InsertStep::LoadI2 => "l.i2",
            InsertStep::Cleanup => "cleanup",
            InsertStep::RangeQueries => "qr",
            InsertStep::PointQueries => "qp",
        }
    }

    pub fn is_load(self) -> bool {
        matches!(
            self,
            InsertStep::LoadI0 | InsertStep::LoadI1 | InsertStep::LoadI2
        )
    }

    /// l.i1, l.i2: an inserter with a deleter behind it.
    pub fn deletes_behind(self) -> bool {
        matches!(self, InsertStep::LoadI1 | InsertStep::LoadI2)
    }

    /// qr, qp: the steps that run for insert.duration_s.
    pub fn is_query(self) -> bool {
        matches!(self, InsertStep::RangeQueries | InsertStep::PointQueries)
    }

    /// Rows per insert statement and commit when the spec does not say.
    pub fn default_rows_per_commit(self) -> Option<u64> {
        match self {
            InsertStep::LoadI0 => Some(100),
            InsertStep::LoadI1 => Some(50),
            InsertStep::LoadI2 => Some(5),
            InsertStep::RangeQueries | InsertStep::PointQueries => Some(10),
            _ => None,
        }
    }
}

/// The Insert Benchmark: one table per client, pi1..piN
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InsertSpec {
    /// l.i0 .. qp (the q-steps' rate in insert_rate)
    pub step: InsertStep,
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
    /// The post-write cleanup step (step cleanup only)
    pub cleanup: Option<CleanupSpec>,
}

/// The post-write cleanup step
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CleanupSpec {
    #[serde(default = "default_statements_timeout_s")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub statements_timeout_s: f64,
}

fn default_statements_timeout_s() -> f64 {
    3600.0
}

impl CleanupSpec {
    /// The cleanup's statement timeout, the default when there is no section.
    pub fn timeout(section: Option<&CleanupSpec>) -> Duration {
        let s = section.map_or(default_statements_timeout_s(), |c| c.statements_timeout_s);
        Duration::from_secs_f64(s)
    }

    /// `step` names the step the section came with, for the error.
    pub fn validate(&self, cleanup_step: bool, step: &str) -> Result<()> {
        if !cleanup_step {
            bail!("workload.cleanup applies only to step cleanup, not {step}");
        }
        let t = self.statements_timeout_s;
        if !(t > 0.0 && t.is_finite()) {
            bail!("workload.cleanup.statements_timeout_s must be > 0, got {t}");
        }
        Ok(())
    }
}

impl InsertSpec {
    /// Rows per insert statement and commit, with the per-step default applied.
    pub fn rows_per_commit(&self) -> u64 {
        let default = self.step.default_rows_per_commit().unwrap_or(1);
        self.rows_per_commit.unwrap_or(default)
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s.unwrap_or(0.0))
    }

    pub fn cleanup_timeout(&self) -> Duration {
        CleanupSpec::timeout(self.cleanup.as_ref())
    }

    /// Which fields the step needs and which it refuses; `clients` sizes expected_rows.
    pub fn validate(&self, clients: u32) -> Result<()> {
        let step = self.step;
        let name = step.name();
        match (step.is_load(), self.rows) {
            (true, None) => bail!("workload.rows is required for step {name}"),
            (false, Some(_)) => bail!("workload.rows does not apply to step {name}"),
            _ => {}
        }
        match (step.is_query(), self.duration_s, self.insert_rate) {
            (true, None, _) => bail!("workload.duration_s is required for step {name}"),
            (true, _, None) => {
                bail!("workload.insert_rate is required for step {name} (0 = no background writes)")
            }
            (true, Some(d), _) if !(d > 0.0 && d.is_finite()) => {
                bail!("workload.duration_s must be > 0, got {d}")
            }
            (false, Some(_), _) => bail!("workload.duration_s does not apply to step {name}"),
            (false, _, Some(_)) => bail!("workload.insert_rate does not apply to step {name}"),
            _ => {}
        }
        match (step.default_rows_per_commit(), self.rows_per_commit) {
            (_, Some(0)) => bail!("workload.rows_per_commit must be at least 1"),
            (None, Some(_)) => bail!("workload.rows_per_commit does not apply to step {name}"),
            _ => {}
        }
        if self.lockstep && !step.deletes_behind() {
            bail!("workload.lockstep does not apply to step {name} (only l.i1 and l.i2)");
        }
        if let Some(expected) = &self.expected_rows {
            if expected.len() != clients as usize {
                bail!(
                    "workload.expected_rows has {} entries, one per client is needed ({clients})",
                    expected.len(),
                );
            }
        }
        if let Some(c) = &self.cleanup {
            c.validate(step == InsertStep::Cleanup, name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &s in InsertStep::ALL {
            let back: InsertStep = serde_json::from_str(&format!("\"{}\"", s.name())).unwrap();
            assert_eq!(back, s);
        }
    }
}
