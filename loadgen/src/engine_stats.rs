//! An engine's own counters (RocksDB's statistics tickers, its LSM size) at one moment,
//! and their deltas over a stretch of a step: the step summary's `engine_stats` (the
//! measured window) and `window_engine_stats` (a profiler's window).

use std::collections::BTreeMap;

/// What the engine says about itself at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineSnapshot {
    /// Named cumulative counters (RocksDB tickers, read by name).
    pub counters: BTreeMap<String, f64>,
    /// Total SST file size.
    pub lsm_bytes: Option<u64>,
}

/// Counters whose deltas make the summary's write amplification and stall time.
pub const USER_BYTES: &str = "rocksdb.bytes.written";
pub const FLUSH_BYTES: &str = "rocksdb.flush.write.bytes";
pub const COMPACT_BYTES: &str = "rocksdb.compact.write.bytes";
pub const STALL_MICROS: &str = "rocksdb.stall.micros";
/// Block-cache data hits and misses: how warm the cache is (a window's probes).
pub const BLOCK_CACHE_DATA_HIT: &str = "rocksdb.block.cache.data.hit";
pub const BLOCK_CACHE_DATA_MISS: &str = "rocksdb.block.cache.data.miss";

/// The summary's engine_stats: deltas between two snapshots over `elapsed_s`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EngineStats {
    pub write_amp: Option<f64>,
    pub stall_pct: Option<f64>,
    pub lsm_bytes: Option<u64>,
    pub statistics: BTreeMap<String, f64>,
}

impl EngineStats {
    pub fn between(before: &EngineSnapshot, after: &EngineSnapshot, elapsed_s: f64) -> Self {
        let statistics: BTreeMap<String, f64> = after
            .counters
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v - before.counters.get(k).copied().unwrap_or(0.0),
                )
            })
            .filter(|(_, d)| *d != 0.0)
            .collect();
        let has = |k: &str| after.counters.contains_key(k);
        let delta = |k: &str| statistics.get(k).copied().unwrap_or(0.0);
        let user = delta(USER_BYTES);
        let write_amp = (has(FLUSH_BYTES) && has(COMPACT_BYTES) && user > 0.0)
            .then(|| (delta(FLUSH_BYTES) + delta(COMPACT_BYTES)) / user);
        let stall_pct = (has(STALL_MICROS) && elapsed_s > 0.0)
            .then(|| delta(STALL_MICROS) / (elapsed_s * 1e6) * 100.0);
        EngineStats {
            write_amp,
            stall_pct,
            lsm_bytes: after.lsm_bytes,
            statistics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(pairs: &[(&str, f64)], lsm: Option<u64>) -> EngineSnapshot {
        EngineSnapshot {
            counters: pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
            lsm_bytes: lsm,
        }
    }

    #[test]
    fn deltas_make_write_amp_and_stall() {
        let before = snap(
            &[
                (USER_BYTES, 100.0),
                (FLUSH_BYTES, 0.0),
                (COMPACT_BYTES, 50.0),
                (STALL_MICROS, 0.0),
                ("rocksdb.other", 7.0),
            ],
            Some(1),
        );
        let after = snap(
            &[
                (USER_BYTES, 1100.0),
                (FLUSH_BYTES, 1000.0),
                (COMPACT_BYTES, 2050.0),
                (STALL_MICROS, 500_000.0),
                ("rocksdb.other", 7.0),
            ],
            Some(4096),
        );
        let s = EngineStats::between(&before, &after, 2.0);
        assert_eq!(s.write_amp, Some(3.0));
        assert_eq!(s.stall_pct, Some(25.0));
        assert_eq!(s.lsm_bytes, Some(4096));
        assert_eq!(s.statistics[USER_BYTES], 1000.0);
        assert!(
            !s.statistics.contains_key("rocksdb.other"),
            "zero deltas are left out"
        );
    }

    #[test]
    fn no_user_writes_or_no_counters_give_nulls() {
        let s = EngineStats::between(&snap(&[], None), &snap(&[], None), 1.0);
        assert_eq!((s.write_amp, s.stall_pct, s.lsm_bytes), (None, None, None));
        let reads = snap(
            &[(USER_BYTES, 5.0), (FLUSH_BYTES, 0.0), (COMPACT_BYTES, 0.0)],
            None,
        );
        assert_eq!(EngineStats::between(&reads, &reads, 1.0).write_amp, None);
    }
}
