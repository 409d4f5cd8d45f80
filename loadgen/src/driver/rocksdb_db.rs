//! The open RocksDB database, shared by the driver (rocksdb.rs), which opens it, and the
//! sessions (rocksdb_session.rs), which read and write it; and RocksDB's errors.

use super::rocksdb_api::{Api, H};
use super::DbError;
use std::ffi::CString;

/// Properties that say whether background work remains, for builds without
/// rocksdb_wait_for_compact.
const BUSY_PROPERTIES: [&str; 4] = [
    "rocksdb.num-running-compactions",
    "rocksdb.compaction-pending",
    "rocksdb.num-running-flushes",
    "rocksdb.mem-table-flush-pending",
];

/// The open database and every handle it owns; closed and freed on drop.
pub(super) struct Db {
    pub(super) api: Api,
    pub(super) db: H,
    pub(super) options: H,
    pub(super) cache: H,
}

// SAFETY: a rocksdb_t is thread-safe; options and cache are only read after the open.
unsafe impl Send for Db {}
unsafe impl Sync for Db {}

impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: the handles were created by this library and are freed once, the
        // database first (it uses the cache); no session outlives the Arc<Db>.
        unsafe {
            (self.api.close)(self.db);
            (self.api.options_destroy)(self.options);
            if !self.cache.is_null() {
                (self.api.cache_destroy)(self.cache);
            }
        }
    }
}

impl Db {
    pub(super) fn property(&self, name: &str) -> Option<String> {
        let c = CString::new(name).ok()?;
        // SAFETY: returns a malloc'ed string or null; take_string frees it.
        self.api
            .take_string(unsafe { (self.api.property_value)(self.db, c.as_ptr()) })
    }

    /// Whether background work (flushes, compactions) remains.
    pub(super) fn busy(&self) -> bool {
        BUSY_PROPERTIES
            .iter()
            .any(|p| self.property(p).and_then(|v| v.trim().parse::<u64>().ok()) != Some(0))
    }
}

/// RocksDB's own words, classified: busy/try-again may pass, the rest ends the step.
pub(super) fn db_error(what: &str, e: String) -> DbError {
    let msg = format!("{what}: {e}");
    if e.starts_with("Resource busy") || e.contains("Try again") {
        DbError::ignorable(msg)
    } else {
        DbError::fatal(msg)
    }
}
