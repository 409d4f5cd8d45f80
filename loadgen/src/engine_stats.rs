//! An engine's own counters (RocksDB's statistics tickers, its LSM size; a SQL
//! engine's buffer counters) at one moment, and their deltas over a stretch of a step:
//! the step summary's `engine_stats` (the measured window) and `window_engine_stats` (a
//! profiler's window).
//!
//! The buffer counters say how warm the engine's cache was over a stretch, so a caller
//! can check that a profiler's window met the state the measured run had:
//!
//! - RocksDB: its block-cache data hits and misses (statistics tickers).
//! - PostgreSQL: the bytes and read calls of the step's sessions' backends, from
//!   /proc/PID/io (`rchar`, `syscr`). A shared-buffer miss is a read of its 8 KB block
//!   from a relation file, made by the backend that misses (PostgreSQL 17 may combine
//!   neighbouring blocks in one call: the bytes still count them); a hit makes no
//!   system call. Read at once, unlike PostgreSQL's own statistics, which a backend
//!   flushes at most once a second and, once idle, only after 10 s (15+; 12-14 send
//!   them to a collector every 500 ms): a read at a window's edge would miss the
//!   window's last second. Other files a backend reads (SLRU pages, temporary files)
//!   count too; socket reads (recv) do not.
//! - InnoDB: `Innodb_buffer_pool_read_requests` (pages asked of the pool) and
//!   `Innodb_buffer_pool_reads` (pages it had to read in), global, by SHOW GLOBAL
//!   STATUS on a connection of its own.
//! - MyRocks: `Rocksdb_block_cache_data_hit` and `Rocksdb_block_cache_data_miss`, the
//!   tickers of the RocksDB inside the server (counted at MyRocks' default
//!   `rocksdb_stats_level`), read the same way.

use anyhow::{anyhow, Result};
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

/// PostgreSQL: what the sessions' backends read (/proc/PID/io rchar and syscr, summed).
pub const PG_READ_BYTES: &str = "postgres.backend.read_bytes";
pub const PG_READ_CALLS: &str = "postgres.backend.read_calls";
/// InnoDB: pages asked of the buffer pool, and those read in (SHOW GLOBAL STATUS).
pub const INNODB_READ_REQUESTS: &str = "innodb.buffer_pool_read_requests";
pub const INNODB_READS: &str = "innodb.buffer_pool_reads";
/// The status variables behind them, as SHOW GLOBAL STATUS names them.
pub const INNODB_STATUS: [(&str, &str); 2] = [
    ("Innodb_buffer_pool_read_requests", INNODB_READ_REQUESTS),
    ("Innodb_buffer_pool_reads", INNODB_READS),
];

/// MyRocks: its RocksDB's block-cache data hits and misses (SHOW GLOBAL STATUS).
pub const MYROCKS_DATA_HIT: &str = "myrocks.block_cache_data_hit";
pub const MYROCKS_DATA_MISS: &str = "myrocks.block_cache_data_miss";
/// The status variables behind them.
pub const MYROCKS_STATUS: [(&str, &str); 2] = [
    ("Rocksdb_block_cache_data_hit", MYROCKS_DATA_HIT),
    ("Rocksdb_block_cache_data_miss", MYROCKS_DATA_MISS),
];

/// The counters that say how warm the engine's cache was: kept in the deltas when 0.
pub const STATE_KEYS: [&str; 8] = [
    BLOCK_CACHE_DATA_HIT,
    BLOCK_CACHE_DATA_MISS,
    PG_READ_BYTES,
    PG_READ_CALLS,
    INNODB_READ_REQUESTS,
    INNODB_READS,
    MYROCKS_DATA_HIT,
    MYROCKS_DATA_MISS,
];

/// (rchar, syscr) of a /proc/PID/io file's text.
pub fn parse_proc_io(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((field("rchar")?, field("syscr")?))
}

/// PostgreSQL's buffer counters: the bytes and read calls of the backends `pids` (the
/// step's sessions), summed. An error names the backend whose file could not be read.
pub fn backends_read(pids: &[u32]) -> Result<BTreeMap<String, f64>> {
    let (mut bytes, mut calls) = (0u64, 0u64);
    for pid in pids {
        let path = format!("/proc/{pid}/io");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            anyhow!("read {path} (the reads of a session's backend, for the engine's state): {e}")
        })?;
        let (b, c) =
            parse_proc_io(&text).ok_or_else(|| anyhow!("{path} has no rchar or syscr: {text}"))?;
        bytes += b;
        calls += c;
    }
    Ok(BTreeMap::from([
        (PG_READ_BYTES.to_string(), bytes as f64),
        (PG_READ_CALLS.to_string(), calls as f64),
    ]))
}

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
            // the buffer counters stay at 0: "no miss" is a state too
            .filter(|(k, d)| *d != 0.0 || STATE_KEYS.contains(&k.as_str()))
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
    fn a_myrocks_window_without_a_miss_keeps_its_zero() {
        let before = snap(&[(MYROCKS_DATA_HIT, 10.0), (MYROCKS_DATA_MISS, 3.0)], None);
        let after = snap(&[(MYROCKS_DATA_HIT, 510.0), (MYROCKS_DATA_MISS, 3.0)], None);
        let s = EngineStats::between(&before, &after, 1.0);
        assert_eq!(s.statistics.get(MYROCKS_DATA_HIT), Some(&500.0));
        // "no miss" is a state: the zero stays for the caller's check
        assert_eq!(s.statistics.get(MYROCKS_DATA_MISS), Some(&0.0));
        assert!(MYROCKS_STATUS.iter().all(|(_, k)| STATE_KEYS.contains(k)));
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
        let idle = snap(&[(PG_READ_BYTES, 8192.0), (PG_READ_CALLS, 1.0)], None);
        let s = EngineStats::between(&idle, &idle, 1.0);
        assert_eq!(
            s.statistics[PG_READ_BYTES], 0.0,
            "a buffer counter stays at 0"
        );
    }

    #[test]
    fn proc_io_gives_bytes_and_calls() {
        let text = "rchar: 81920\nwchar: 12\nsyscr: 10\nsyscw: 1\nread_bytes: 0\n";
        assert_eq!(parse_proc_io(text), Some((81920, 10)));
        assert_eq!(parse_proc_io("wchar: 1\n"), None, "no rchar");
        assert_eq!(parse_proc_io("rchar: x\nsyscr: 1\n"), None, "not a number");
    }

    #[test]
    fn own_process_reads_are_counted_and_a_gone_backend_is_an_error() {
        let me = std::process::id();
        let before = backends_read(&[me]).unwrap();
        std::fs::read_to_string("/proc/self/stat").unwrap();
        let after = backends_read(&[me]).unwrap();
        assert!(after[PG_READ_BYTES] > before[PG_READ_BYTES]);
        assert!(after[PG_READ_CALLS] > before[PG_READ_CALLS]);
        let err = backends_read(&[me, u32::MAX]).unwrap_err().to_string();
        assert!(err.contains(&format!("/proc/{}/io", u32::MAX)), "{err}");
        assert!(backends_read(&[]).unwrap()[PG_READ_BYTES] == 0.0);
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
