//! The key-value boundary that the kv workload speaks to (db_bench-style steps). An
//! embedded store is opened once per step; each thread takes its own session.

use super::DbResult;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// How a session writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteMode {
    pub disable_wal: bool,
    pub sync: bool,
}

/// One opened key-value store, shared by every thread of the step.
pub trait KvStore: Send + Sync {
    /// A session for one thread: its own read and write options.
    fn session(&self, mode: WriteMode) -> DbResult<Box<dyn KvConn>>;
    /// Flush the memtable to an L0 file and wait for the flush.
    fn flush(&self) -> DbResult<()>;
    /// Compact L0 into L1 (a manual compaction of the whole key range to level 1).
    fn compact_l0(&self) -> DbResult<()>;
    /// Wait until no flush or compaction runs or is pending; gives up when `stop` is set.
    fn wait_for_compaction(&self, stop: &AtomicBool) -> DbResult<()>;
    /// The engine's counters now, for the step's deltas.
    fn snapshot(&self) -> DbResult<EngineSnapshot>;
}

/// One thread's session. Keys and values are borrowed; nothing is copied out.
pub trait KvConn: Send {
    fn put(&mut self, key: &[u8], value: &[u8]) -> DbResult<()>;
    /// Point read; true when the key was found.
    fn get(&mut self, key: &[u8]) -> DbResult<bool>;
    /// Seek to the first key >= `key`, then read up to `n` entries forwards.
    fn seek_next(&mut self, key: &[u8], n: u64) -> DbResult<u64>;
    /// Seek to the last key <= `key`, then read up to `n` entries backwards.
    fn seek_prev(&mut self, key: &[u8], n: u64) -> DbResult<u64>;
}

/// Key `n` as the kv workload writes it: `n` big-endian in the first 8 bytes, then
/// zero bytes up to the key size, so byte order is numeric order. `key` is reused.
pub fn encode_key(n: u64, key: &mut [u8]) {
    key[..8].copy_from_slice(&n.to_be_bytes());
}

/// A zeroed key buffer of `size` bytes (at least 8).
pub fn key_buffer(size: usize) -> Vec<u8> {
    vec![0; size.max(8)]
}

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
    fn keys_sort_in_numeric_order() {
        let nums = [0u64, 1, 255, 256, 65_535, 1 << 32, u64::MAX - 1];
        let keys: Vec<Vec<u8>> = nums
            .iter()
            .map(|&n| {
                let mut k = key_buffer(20);
                encode_key(n, &mut k);
                k
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(keys[2].len(), 20);
        assert_eq!(&keys[3][..8], &[0, 0, 0, 0, 0, 0, 1, 0]);
        assert!(keys[3][8..].iter().all(|&b| b == 0));
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
