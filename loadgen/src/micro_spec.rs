//! The step spec's microbenchmark part (METHOD.md section 3): the step names and the
//! `micro` section. Kept apart from spec.rs so other workloads' changes merge cleanly.

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

/// Sizes of a micro step
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MicroSpec {
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
}

impl Default for MicroSpec {
    fn default() -> Self {
        MicroSpec {
            tables: default_tables(),
            rows: default_rows(),
            range_size: default_range_size(),
            duration_s: None,
        }
    }
}

fn default_tables() -> u32 {
    1
}

fn default_rows() -> u64 {
    10_000
}

fn default_range_size() -> u64 {
    100
}

impl MicroSpec {
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s.unwrap_or(0.0))
    }

    /// Check the section for `step` (None: the shared cleanup step).
    pub fn validate(&self, step: Option<MicroStep>) -> Result<()> {
        if self.tables == 0 {
            bail!("micro.tables must be at least 1");
        }
        if self.rows < 10 || self.rows > i32::MAX as u64 {
            bail!("micro.rows must be 10 .. 2^31-1, got {}", self.rows);
        }
        if self.range_size == 0 || self.range_size > self.rows {
            bail!(
                "micro.range_size must be 1 .. micro.rows ({}), got {}",
                self.rows,
                self.range_size
            );
        }
        let timed = !matches!(step, None | Some(MicroStep::Load));
        let name = step.map_or("cleanup", MicroStep::name);
        match (timed, self.duration_s) {
            (true, None) => bail!("micro.duration_s is required for step {name}"),
            (true, Some(d)) if !(d > 0.0 && d.is_finite()) => {
                bail!("micro.duration_s must be > 0, got {d}")
            }
            (false, Some(_)) => bail!("micro.duration_s does not apply to step {name}"),
            _ => Ok(()),
        }
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
        assert_eq!(MicroStep::ALL.len(), 28);
    }

    #[test]
    fn validation_names_the_field() {
        let m = |j: &str| serde_json::from_str::<MicroSpec>(j).unwrap();
        let err = |m: MicroSpec, s| format!("{:#}", m.validate(s).unwrap_err());
        assert!(err(m("{}"), Some(MicroStep::Scan)).contains("micro.duration_s"));
        assert!(err(m(r#"{"duration_s": 1}"#), Some(MicroStep::Load)).contains("does not apply"));
        assert!(err(m(r#"{"rows": 5}"#), Some(MicroStep::Load)).contains("micro.rows"));
        let big_range = m(r#"{"rows": 50, "range_size": 51, "duration_s": 1}"#);
        assert!(err(big_range, Some(MicroStep::ReadOnly)).contains("range_size"));
        m(r#"{"duration_s": 0.5}"#)
            .validate(Some(MicroStep::PointQuery))
            .unwrap();
        m("{}").validate(None).unwrap();
    }
}
