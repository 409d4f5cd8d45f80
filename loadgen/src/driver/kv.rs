//! The key-value boundary that the kv workload speaks to (db_bench-style steps). An
//! embedded store is opened once per step; each thread takes its own session.

use super::DbResult;
pub use crate::engine_stats::EngineSnapshot;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
