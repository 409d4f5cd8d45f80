//! The microbenchmarks' workload (docs/lab-file.md, The micro benchmark): its steps and its fields, with
//! their defaults. Kept apart from spec.rs so other workloads' changes merge cleanly.

use crate::insert_spec::CleanupSpec;
use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// Declares the steps once: the enum, its serialized names, and `name()`.
macro_rules! micro_steps {
    ($($variant:ident = $name:literal),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
        pub enum MicroStep {
            $(#[serde(rename = $name)] $variant),*
        }

        impl MicroStep {
            #[cfg(test)]
            pub const ALL: &'static [MicroStep] = &[$(MicroStep::$variant),*];

            pub fn name(self) -> &'static str {
                match self {
                    $(MicroStep::$variant => $name),*
                }
            }
        }
    };
}

micro_steps! {
    Load = "load",
    Cleanup = "cleanup",
    PointQuery = "point-query",
    RandomPoints = "random-points",
    HotPoints = "hot-points",
    PointsCoveredPk = "points-covered-pk",
    PointsNotcoveredPk = "points-notcovered-pk",
    PointsCoveredSi = "points-covered-si",
    PointsNotcoveredSi = "points-notcovered-si",
    RangeCoveredPk = "range-covered-pk",
    RangeNotcoveredPk = "range-notcovered-pk",
    RangeCoveredSi = "range-covered-si",
    RangeNotcoveredSi = "range-notcovered-si",
    ReadOnly = "read-only",
    ReadOnlySimple = "read-only-simple",
    ReadOnlySum = "read-only-sum",
    ReadOnlyOrder = "read-only-order",
    ReadOnlyDistinct = "read-only-distinct",
    ReadOnlyCount = "read-only-count",
    Scan = "scan",
    UpdateInlist = "update-inlist",
    UpdateIndex = "update-index",
    UpdateNonindex = "update-nonindex",
    UpdateOne = "update-one",
    UpdateZipf = "update-zipf",
    WriteOnly = "write-only",
    ReadWrite = "read-write",
    Delete = "delete",
    Insert = "insert",
}

impl MicroStep {
    /// Every step but load and cleanup runs for duration_s.
    pub fn is_timed(self) -> bool {
        !matches!(self, MicroStep::Load | MicroStep::Cleanup)
    }
}

/// sysbench-style microbenchmarks on sbtest1..N
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MicroSpec {
    /// load, cleanup (the post-write cleanup), and the suite's steps (one op =
    /// one statement; for read-only*, write-only, read-write one transaction;
    /// read-only-simple/-sum/-order/-distinct/-count run BEGIN, that one range query,
    /// COMMIT)
    pub step: MicroStep,
    /// Tables sbtest1..sbtestN
    #[serde(default = "default_tables")]
    #[schemars(range(min = 1))]
    pub tables: u32,
    /// Rows per table, ids 1..rows (load writes them; other steps draw ids from them)
    #[serde(default = "default_rows")]
    #[schemars(range(min = 10, max = i32::MAX))]
    pub rows: u64,
    /// Rows per range query (range-*, read-only*, read-write); at most rows
    #[serde(default = "default_range_size")]
    #[schemars(range(min = 1))]
    pub range_size: u64,
    /// Seconds each timed step runs (every step but load and cleanup)
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub duration_s: Option<f64>,
    /// The post-write cleanup step (step cleanup only)
    pub cleanup: Option<CleanupSpec>,
}

fn default_tables() -> u32 {
    1
}

/// The rows per table when the spec does not say (also the null driver's for other
/// workloads).
pub fn default_rows() -> u64 {
    10_000
}

fn default_range_size() -> u64 {
    100
}

impl MicroSpec {
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s.unwrap_or(0.0))
    }

    pub fn cleanup_timeout(&self) -> Duration {
        CleanupSpec::timeout(self.cleanup.as_ref())
    }

    pub fn validate(&self) -> Result<()> {
        if self.tables == 0 {
            bail!("workload.tables must be at least 1");
        }
        if self.rows < 10 || self.rows > i32::MAX as u64 {
            bail!("workload.rows must be 10 .. 2^31-1, got {}", self.rows);
        }
        if self.range_size == 0 || self.range_size > self.rows {
            bail!(
                "workload.range_size must be 1 .. workload.rows ({}), got {}",
                self.rows,
                self.range_size
            );
        }
        let name = self.step.name();
        match (self.step.is_timed(), self.duration_s) {
            (true, None) => bail!("workload.duration_s is required for step {name}"),
            (true, Some(d)) if !(d > 0.0 && d.is_finite()) => {
                bail!("workload.duration_s must be > 0, got {d}")
            }
            (false, Some(_)) => bail!("workload.duration_s does not apply to step {name}"),
            _ => {}
        }
        if let Some(c) = &self.cleanup {
            c.validate(self.step == MicroStep::Cleanup, name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &s in MicroStep::ALL {
            let back: MicroStep = serde_json::from_str(&format!("\"{}\"", s.name())).unwrap();
            assert_eq!(back, s);
        }
        assert_eq!(MicroStep::ALL.len(), 29);
    }

    #[test]
    fn validation_names_the_field() {
        let m = |j: &str| serde_json::from_str::<MicroSpec>(j).unwrap();
        let err = |m: MicroSpec| format!("{:#}", m.validate().unwrap_err());
        assert!(err(m(r#"{"step": "scan"}"#)).contains("workload.duration_s"));
        let load_timed = m(r#"{"step": "load", "duration_s": 1}"#);
        assert!(err(load_timed).contains("does not apply"));
        assert!(err(m(r#"{"step": "load", "rows": 5}"#)).contains("workload.rows"));
        let big_range =
            m(r#"{"step": "read-only", "rows": 50, "range_size": 51, "duration_s": 1}"#);
        assert!(err(big_range).contains("range_size"));
        m(r#"{"step": "point-query", "duration_s": 0.5}"#)
            .validate()
            .unwrap();
        m(r#"{"step": "cleanup"}"#).validate().unwrap();
        let timeout = r#"{"step": "cleanup", "cleanup": {"statements_timeout_s": 5}}"#;
        assert_eq!(m(timeout).cleanup_timeout().as_secs(), 5);
        let misplaced = m(r#"{"step": "load", "cleanup": {}}"#);
        assert!(err(misplaced).contains("applies only to step cleanup"));
    }
}
