//! The kv workload (db_bench-style steps, docs/lab-file.md): its steps and its sizes,
//! and the `rocksdb` engine's options (schema/step-spec.schema.json, generated from these
//! types), with their defaults and the checks the schema alone cannot make.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KvStep {
    Fillseq,
    Revrange,
    Overwritesome,
    #[serde(rename = "flush_mt_l0")]
    FlushMtL0,
    Readrandom,
    Fwdrange,
    #[serde(rename = "revrangewhilewriting")]
    RevrangeWhileWriting,
    #[serde(rename = "fwdrangewhilewriting")]
    FwdrangeWhileWriting,
    #[serde(rename = "readwhilewriting")]
    ReadWhileWriting,
    #[serde(rename = "overwriteandwait")]
    OverwriteAndWait,
    Overwrite,
}

impl KvStep {
    #[cfg(test)]
    pub const ALL: &'static [KvStep] = &[
        KvStep::Fillseq,
        KvStep::Revrange,
        KvStep::Overwritesome,
        KvStep::FlushMtL0,
        KvStep::Readrandom,
        KvStep::Fwdrange,
        KvStep::RevrangeWhileWriting,
        KvStep::FwdrangeWhileWriting,
        KvStep::ReadWhileWriting,
        KvStep::OverwriteAndWait,
        KvStep::Overwrite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            KvStep::Fillseq => "fillseq",
            KvStep::Revrange => "revrange",
            KvStep::Overwritesome => "overwritesome",
            KvStep::FlushMtL0 => "flush_mt_l0",
            KvStep::Readrandom => "readrandom",
            KvStep::Fwdrange => "fwdrange",
            KvStep::RevrangeWhileWriting => "revrangewhilewriting",
            KvStep::FwdrangeWhileWriting => "fwdrangewhilewriting",
            KvStep::ReadWhileWriting => "readwhilewriting",
            KvStep::OverwriteAndWait => "overwriteandwait",
            KvStep::Overwrite => "overwrite",
        }
    }

    /// The steps that run for the workload's duration_s.
    pub fn is_timed(self) -> bool {
        !matches!(
            self,
            KvStep::Fillseq | KvStep::Overwritesome | KvStep::FlushMtL0
        )
    }
}

/// db_bench-style steps on an embedded key-value engine
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KvSpec {
    /// The published RocksDB reports' steps, plus overwrite (random overwrites for duration_s, for
    /// side-by-side runs with db_bench)
    pub step: KvStep,
    /// Keys in the database (fillseq writes 0..keys-1; other steps pick among them uniformly)
    #[schemars(range(min = 1))]
    pub keys: Option<u64>,
    #[serde(default = "default_key_size")]
    #[schemars(range(min = 8))]
    pub key_size: usize,
    #[serde(default = "default_value_size")]
    #[schemars(range(min = 1))]
    pub value_size: usize,
    /// Timed steps: revrange, readrandom, fwdrange, *whilewriting, overwrite,
    /// overwriteandwait (its overwrite phase)
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub duration_s: Option<f64>,
    /// overwritesome: fraction of keys overwritten
    #[serde(default = "default_overwrite_fraction")]
    #[schemars(range(max = 1), extend("exclusiveMinimum" = 0))]
    pub overwrite_fraction: f64,
    /// Entries read after each seek in range steps
    #[serde(default = "default_range_len")]
    #[schemars(range(min = 1))]
    pub range_len: u64,
    /// *whilewriting: the one background writer's limit, MB/s of key+value bytes
    #[serde(default = "default_writer_mb_per_s")]
    #[schemars(range(min = 0))]
    pub writer_mb_per_s: f64,
    /// Default true for fillseq, false otherwise
    pub disable_wal: Option<bool>,
}

/// The key size when the spec does not say (also the null driver's for other workloads).
pub fn default_key_size() -> usize {
    20
}
fn default_value_size() -> usize {
    400
}
fn default_overwrite_fraction() -> f64 {
    0.1
}
fn default_range_len() -> u64 {
    10
}
fn default_writer_mb_per_s() -> f64 {
    2.0
}

impl KvSpec {
    pub fn keys(&self) -> u64 {
        self.keys.unwrap_or(0)
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_s.unwrap_or(0.0))
    }

    /// The WAL is off for fillseq and on otherwise, unless the spec says.
    pub fn disable_wal(&self) -> bool {
        self.disable_wal.unwrap_or(self.step == KvStep::Fillseq)
    }

    /// The background writer's limit in bytes of key + value per second (MB = 2^20).
    pub fn writer_bytes_per_s(&self) -> f64 {
        self.writer_mb_per_s * 1024.0 * 1024.0
    }

    pub fn entry_bytes(&self) -> usize {
        self.key_size + self.value_size
    }

    pub fn validate(&self) -> Result<()> {
        let step = self.step;
        let name = step.name();
        // flush_mt_l0 touches no key; every other step needs to know the key space.
        if step != KvStep::FlushMtL0 && self.keys.is_none_or(|k| k == 0) {
            bail!("workload.keys (at least 1) is required for step {name}");
        }
        if self.key_size < 8 {
            bail!(
                "workload.key_size must be at least 8, got {}",
                self.key_size
            );
        }
        if self.value_size == 0 || self.range_len == 0 {
            bail!("workload.value_size and workload.range_len must be at least 1");
        }
        match (step.is_timed(), self.duration_s) {
            (true, None) => bail!("workload.duration_s is required for step {name}"),
            (true, Some(d)) if !(d > 0.0 && d.is_finite()) => {
                bail!("workload.duration_s must be > 0, got {d}")
            }
            (false, Some(_)) => bail!("workload.duration_s does not apply to step {name}"),
            _ => {}
        }
        let f = self.overwrite_fraction;
        if !(f > 0.0 && f <= 1.0) {
            bail!("workload.overwrite_fraction must be in (0, 1], got {f}");
        }
        if !(self.writer_mb_per_s >= 0.0 && self.writer_mb_per_s.is_finite()) {
            bail!(
                "workload.writer_mb_per_s must be >= 0, got {}",
                self.writer_mb_per_s
            );
        }
        Ok(())
    }
}

// Serialize for the schema's defaults; no doc comments on the variants, which would
// make the schema's `enum` a `oneOf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheType {
    Lru,
    HyperClock,
    AutoHyperClock,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Lz4,
}

/// The rocksdb engine's options; an option left out takes its default
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RocksOptions {
    /// Block cache capacity
    #[schemars(range(min = 1))]
    pub cache_mb: Option<u64>,
    #[serde(default = "default_cache_type")]
    pub cache_type: CacheType,
    /// hyper_clock only; default block_size
    pub estimated_entry_charge: Option<u64>,
    #[serde(default = "default_block_size")]
    #[schemars(range(min = 512))]
    pub block_size: u64,
    /// 0 = no bloom filter
    #[serde(default = "default_bloom_bits")]
    #[schemars(range(min = 0))]
    pub bloom_bits: f64,
    #[serde(default = "default_compression")]
    pub compression: Compression,
    /// O_DIRECT for reads and for flush/compaction writes
    #[serde(default)]
    pub direct_io: bool,
    /// needs RocksDB 11.0+
    #[serde(default)]
    pub block_align: bool,
    #[serde(default = "default_write_buffer_mb")]
    #[schemars(range(min = 1))]
    pub write_buffer_mb: u64,
    #[serde(default = "default_max_background_jobs")]
    #[schemars(range(min = 1))]
    pub max_background_jobs: u32,
    #[serde(default = "default_l0_trigger")]
    #[schemars(range(min = 1))]
    pub level0_file_num_compaction_trigger: u32,
    #[serde(default = "default_max_bytes_for_level_base_mb")]
    #[schemars(range(min = 1))]
    pub max_bytes_for_level_base_mb: u64,
    #[serde(default = "default_target_file_size_base_mb")]
    #[schemars(range(min = 1))]
    pub target_file_size_base_mb: u64,
    /// fsync the WAL on every write
    #[serde(default)]
    pub sync: bool,
}

fn default_cache_type() -> CacheType {
    CacheType::Lru
}
fn default_block_size() -> u64 {
    8192
}
fn default_bloom_bits() -> f64 {
    10.0
}
fn default_compression() -> Compression {
    Compression::None
}
fn default_write_buffer_mb() -> u64 {
    64
}
fn default_max_background_jobs() -> u32 {
    2
}
fn default_l0_trigger() -> u32 {
    4
}
fn default_max_bytes_for_level_base_mb() -> u64 {
    256
}
fn default_target_file_size_base_mb() -> u64 {
    64
}

impl RocksOptions {
    pub fn validate(&self) -> Result<()> {
        if self.estimated_entry_charge.is_some() && self.cache_type != CacheType::HyperClock {
            bail!("engine.options.estimated_entry_charge applies only to cache_type hyper_clock");
        }
        if self.block_size < 512 {
            bail!("engine.options.block_size must be at least 512");
        }
        if !(self.bloom_bits >= 0.0 && self.bloom_bits.is_finite()) {
            bail!("engine.options.bloom_bits must be >= 0");
        }
        let sizes = [
            ("write_buffer_mb", self.write_buffer_mb),
            (
                "max_bytes_for_level_base_mb",
                self.max_bytes_for_level_base_mb,
            ),
            ("target_file_size_base_mb", self.target_file_size_base_mb),
            ("max_background_jobs", self.max_background_jobs as u64),
            (
                "level0_file_num_compaction_trigger",
                self.level0_file_num_compaction_trigger as u64,
            ),
        ];
        for (name, v) in sizes {
            if v == 0 {
                bail!("engine.options.{name} must be at least 1");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> serde_json::Value {
        serde_json::from_str(include_str!("../../schema/step-spec.schema.json")).unwrap()
    }

    /// The `default` of every property of the schema object `node`.
    fn defaults_of(node: &serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        let props = node["properties"].as_object().expect("properties");
        props
            .iter()
            .filter_map(|(k, v)| v.get("default").map(|d| (k.clone(), d.clone())))
            .collect()
    }

    /// A kv spec from the fields of a `workload` object (without its kind).
    fn kv(json: &str) -> KvSpec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn defaults_follow_the_schema() {
        // What serde fills in for an absent key must be what the schema says it is.
        let schema = schema();
        let workload = schema["properties"]["workload"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["properties"]["kind"]["const"] == "kv")
            .expect("the kv workload in the schema");
        let mut given = defaults_of(workload);
        assert!(given.len() >= 5, "{given:?}");
        given.insert("step".into(), "fillseq".into());
        given.insert("keys".into(), 10.into());
        let from_schema: KvSpec = serde_json::from_value(given.into()).unwrap();
        let from_serde = kv(r#"{"step": "fillseq", "keys": 10}"#);
        assert_eq!(format!("{from_schema:?}"), format!("{from_serde:?}"));
        let rocks = schema["properties"]["engine"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["properties"]["options"]["properties"]["block_size"].is_object())
            .expect("the rocksdb engine in the schema");
        let given = defaults_of(&rocks["properties"]["options"]);
        assert!(given.len() >= 10, "{given:?}");
        let from_schema: RocksOptions = serde_json::from_value(given.into()).unwrap();
        let from_serde: RocksOptions = serde_json::from_str("{}").unwrap();
        assert_eq!(format!("{from_schema:?}"), format!("{from_serde:?}"));
        let fill = kv(r#"{"step": "fillseq"}"#);
        assert_eq!(
            (fill.key_size, fill.value_size, fill.range_len),
            (20, 400, 10)
        );
        assert_eq!(fill.overwrite_fraction, 0.1);
        assert!(fill.disable_wal(), "fillseq writes without a WAL");
        assert!(!kv(r#"{"step": "overwrite"}"#).disable_wal());
        assert_eq!(fill.writer_bytes_per_s(), 2.0 * 1048576.0);
        let o: RocksOptions = serde_json::from_str("{}").unwrap();
        assert_eq!((o.block_size, o.write_buffer_mb), (8192, 64));
        assert_eq!((o.bloom_bits, o.cache_type), (10.0, CacheType::Lru));
        assert!(o.validate().is_ok());
    }

    #[test]
    fn timed_steps_need_a_duration_and_others_refuse_one() {
        assert!(kv(r#"{"step": "fillseq", "keys": 10}"#).validate().is_ok());
        let e = kv(r#"{"step": "readrandom", "keys": 10}"#)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("workload.duration_s is required"), "{e}");
        let timed = kv(r#"{"step": "fillseq", "keys": 10, "duration_s": 1}"#);
        assert!(timed.validate().is_err());
        assert!(kv(r#"{"step": "flush_mt_l0"}"#).validate().is_ok());
    }

    #[test]
    fn names_round_trip() {
        for &s in KvStep::ALL {
            let back: KvStep = serde_json::from_str(&format!("\"{}\"", s.name())).unwrap();
            assert_eq!(back, s);
        }
    }
}
