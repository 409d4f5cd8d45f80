//! RocksDB, embedded: the C API of a library given at run time (rocksdb_api), one
//! database opened per step with the spec's options. Options a build lacks are refused
//! by name and version; optional functions it has are listed as capabilities.

use super::kv::{EngineSnapshot, KvConn, KvStore, WriteMode};
use super::rocksdb_api::{Api, BloomAbi, Version, H};
use super::rocksdb_db::{db_error, Db};
use super::rocksdb_session::RocksConn;
use super::rocksdb_stats::parse_statistics;
use super::{DbError, DbResult, Driver};
use crate::kvspec::{CacheType, Compression, RocksOptions};
use anyhow::{bail, Result};
use std::ffi::{c_char, CString};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

const MB: u64 = 1 << 20;
const AUTO_HYPER_CLOCK: Version = Version(8, 7, 0);

pub struct RocksDriver {
    db: Arc<Db>,
    capabilities: Vec<&'static str>,
}

/// Optional features this build has.
fn capabilities(api: &Api, v: Version) -> Vec<&'static str> {
    let mut caps = Vec::new();
    if api.cache_create_hyper_clock.is_some() {
        caps.push("hyper_clock_cache");
        if v >= AUTO_HYPER_CLOCK {
            caps.push("auto_hyper_clock_cache");
        }
    }
    let w = &api.wait_for_compact;
    if w.is_some() && api.wait_for_compact_options_create.is_some() {
        caps.push("wait_for_compact");
    }
    if api.block_based_options_set_block_align.is_some() {
        caps.push("block_align");
    }
    caps
}

/// Refuse options this build cannot honour, naming the option and the version needed.
fn gate(o: &RocksOptions, caps: &[&str], v: Version) -> Result<()> {
    let has = |c: &str| caps.contains(&c);
    let charge = o.estimated_entry_charge;
    match o.cache_type {
        CacheType::Lru => {}
        _ if o.cache_mb.is_none() => {
            bail!("engine.options.cache_type other than lru needs engine.options.cache_mb")
        }
        _ if !has("hyper_clock_cache") => bail!(
            "engine.options.cache_type hyper_clock needs RocksDB 8.1+ \
             (rocksdb_cache_create_hyper_clock); this library is RocksDB {v}"
        ),
        CacheType::AutoHyperClock if !has("auto_hyper_clock_cache") => bail!(
            "engine.options.cache_type auto_hyper_clock needs RocksDB 8.7+; \
             this library is RocksDB {v}"
        ),
        CacheType::HyperClock if charge == Some(0) && v < AUTO_HYPER_CLOCK => bail!(
            "engine.options.estimated_entry_charge 0 (automatic) needs RocksDB 8.7+; \
             this library is RocksDB {v}"
        ),
        _ => {}
    }
    if o.block_align && !has("block_align") {
        bail!("engine.options.block_align needs RocksDB 11.0+; this library is RocksDB {v}");
    }
    Ok(())
}

impl RocksDriver {
    /// Load the library, check the options against it, open the database (creating it
    /// only when `create`, for fillseq).
    pub fn open(
        library: &str,
        version: &str,
        db_path: &str,
        o: &RocksOptions,
        create: bool,
    ) -> Result<RocksDriver> {
        let v = Version::parse(version)?;
        let api = Api::load(library)?;
        let capabilities = capabilities(&api, v);
        gate(o, &capabilities, v)?;
        // SAFETY: handles are created, configured and handed over as rocksdb/c.h says;
        // the block-based options are copied into the table factory, then freed.
        let (options, cache) = unsafe { configure(&api, o, v, create) };
        let path = CString::new(db_path)?;
        let mut err: *mut c_char = std::ptr::null_mut();
        let db = unsafe { (api.open)(options, path.as_ptr(), &mut err) };
        if let Err(e) = api.check(err) {
            unsafe {
                (api.options_destroy)(options);
                if !cache.is_null() {
                    (api.cache_destroy)(cache);
                }
            }
            let hint = if create {
                ""
            } else {
                " (steps after fillseq open the database fillseq created)"
            };
            bail!("cannot open RocksDB {v} database {db_path}{hint}: {e}");
        }
        Ok(RocksDriver {
            db: Arc::new(Db {
                api,
                db,
                options,
                cache,
            }),
            capabilities,
        })
    }
}

/// Build the DB options; returns them and the block cache (null for the default).
unsafe fn configure(api: &Api, o: &RocksOptions, v: Version, create: bool) -> (H, H) {
    let opts = (api.options_create)();
    (api.options_set_create_if_missing)(opts, create as u8);
    let compression = match o.compression {
        Compression::None => 0,
        Compression::Lz4 => 4,
    };
    (api.options_set_compression)(opts, compression);
    (api.options_set_write_buffer_size)(opts, (o.write_buffer_mb * MB) as usize);
    (api.options_set_max_background_jobs)(opts, o.max_background_jobs as i32);
    let l0 = o.level0_file_num_compaction_trigger as i32;
    (api.options_set_level0_file_num_compaction_trigger)(opts, l0);
    (api.options_set_max_bytes_for_level_base)(opts, o.max_bytes_for_level_base_mb * MB);
    (api.options_set_target_file_size_base)(opts, o.target_file_size_base_mb * MB);
    (api.options_set_use_direct_reads)(opts, o.direct_io as u8);
    (api.options_set_use_direct_io_for_flush_and_compaction)(opts, o.direct_io as u8);
    (api.options_enable_statistics)(opts);
    let table = (api.block_based_options_create)();
    (api.block_based_options_set_block_size)(table, o.block_size as usize);
    if o.bloom_bits > 0.0 {
        let policy = api.bloom(o.bloom_bits, BloomAbi::for_version(v));
        (api.block_based_options_set_filter_policy)(table, policy); // takes ownership
    }
    let cache = match o.cache_mb {
        None => std::ptr::null_mut(),
        Some(mb) => {
            let bytes = (mb * MB) as usize;
            let charge = match o.cache_type {
                CacheType::AutoHyperClock => Some(0),
                CacheType::HyperClock => Some(o.estimated_entry_charge.unwrap_or(o.block_size)),
                CacheType::Lru => None,
            };
            let c = match (charge, api.cache_create_hyper_clock) {
                (Some(ch), Some(f)) => f(bytes, ch as usize),
                _ => (api.cache_create_lru)(bytes),
            };
            (api.block_based_options_set_block_cache)(table, c);
            c
        }
    };
    if let (true, Some(f)) = (o.block_align, api.block_based_options_set_block_align) {
        f(table, 1);
    }
    (api.options_set_block_based_table_factory)(opts, table);
    (api.block_based_options_destroy)(table);
    (opts, cache)
}

impl Driver for RocksDriver {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn kv(&self) -> Option<&dyn KvStore> {
        Some(self)
    }

    fn capabilities(&self) -> Option<Vec<&'static str>> {
        Some(self.capabilities.clone())
    }
}

impl KvStore for RocksDriver {
    fn session(&self, mode: WriteMode) -> DbResult<Box<dyn KvConn>> {
        let api = &self.db.api;
        // SAFETY: fresh option handles, owned by the session and freed on its drop.
        let (ro, wo) = unsafe { ((api.readoptions_create)(), (api.writeoptions_create)()) };
        unsafe {
            (api.writeoptions_disable_WAL)(wo, mode.disable_wal as i32);
            (api.writeoptions_set_sync)(wo, mode.sync as u8);
        }
        let batch = unsafe { (api.writebatch_create)() };
        Ok(Box::new(RocksConn::new(self.db.clone(), ro, wo, batch)))
    }

    fn flush(&self) -> DbResult<()> {
        let (api, mut err) = (&self.db.api, std::ptr::null_mut());
        // SAFETY: a transient flush-options handle, freed here.
        unsafe {
            let fo = (api.flushoptions_create)();
            (api.flushoptions_set_wait)(fo, 1);
            (api.flush)(self.db.db, fo, &mut err);
            (api.flushoptions_destroy)(fo);
        }
        api.check(err).map_err(|e| db_error("flush", e))
    }

    fn compact_l0(&self) -> DbResult<()> {
        let api = &self.db.api;
        // SAFETY: the whole key range (null bounds), moved to level 1; transient options.
        unsafe {
            let co = (api.compactoptions_create)();
            (api.compactoptions_set_exclusive_manual_compaction)(co, 1);
            (api.compactoptions_set_change_level)(co, 1);
            (api.compactoptions_set_target_level)(co, 1);
            let null = std::ptr::null();
            (api.compact_range_opt)(self.db.db, co, null, 0, null, 0);
            (api.compactoptions_destroy)(co);
        }
        Ok(())
    }

    fn wait_for_compaction(&self, stop: &AtomicBool) -> DbResult<()> {
        let api = &self.db.api;
        if let (Some(wait), Some(create), Some(destroy)) = (
            api.wait_for_compact,
            api.wait_for_compact_options_create,
            api.wait_for_compact_options_destroy,
        ) {
            let mut err = std::ptr::null_mut();
            // SAFETY: transient options with their defaults (no timeout), freed here.
            unsafe {
                let o = create();
                wait(self.db.db, o, &mut err);
                destroy(o);
            }
            return api
                .check(err)
                .map_err(|e| db_error("wait for compaction", e));
        }
        while self.db.busy() {
            if stop.load(Relaxed) {
                return Err(DbError::fatal("wait for compaction: stopped"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    fn snapshot(&self) -> DbResult<EngineSnapshot> {
        let api = &self.db.api;
        // SAFETY: a malloc'ed string or null, freed by take_string.
        let text = api.take_string(unsafe { (api.options_statistics_get_string)(self.db.options) });
        let lsm = self.db.property("rocksdb.total-sst-files-size");
        Ok(EngineSnapshot {
            counters: parse_statistics(text.as_deref().unwrap_or("")),
            lsm_bytes: lsm.and_then(|s| s.trim().parse().ok()),
        })
    }
}

#[cfg(test)]
mod tests;
