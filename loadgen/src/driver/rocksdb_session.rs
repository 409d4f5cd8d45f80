//! One thread's RocksDB session: point reads with pinned slices, range reads with an
//! iterator whose keys and values are looked at in place, puts through a reused batch.

use super::kv::KvConn;
use super::rocksdb_api::H;
use super::rocksdb_db::{db_error, Db};
use super::DbResult;
use std::sync::Arc;

/// One thread's session: its read and write options and write batch.
pub struct RocksConn {
    db: Arc<Db>,
    ro: H,
    wo: H,
    batch: H,
}

// SAFETY: the option handles belong to this session alone.
unsafe impl Send for RocksConn {}

impl Drop for RocksConn {
    fn drop(&mut self) {
        // SAFETY: created in session(), freed once.
        unsafe {
            (self.db.api.readoptions_destroy)(self.ro);
            (self.db.api.writeoptions_destroy)(self.wo);
            (self.db.api.writebatch_destroy)(self.batch);
        }
    }
}

impl RocksConn {
    /// Owns the option handles and the batch from now on.
    pub(super) fn new(db: Arc<Db>, ro: H, wo: H, batch: H) -> RocksConn {
        RocksConn { db, ro, wo, batch }
    }

    /// Seek with `seek`, then read up to `n` entries stepping with `step`; no copies.
    fn scan(&mut self, key: &[u8], n: u64, forward: bool) -> DbResult<u64> {
        let api = &self.db.api;
        let mut read = 0;
        let mut err = std::ptr::null_mut();
        // SAFETY: the iterator lives within this call; key and value pointers are only
        // looked at while it is positioned on them.
        unsafe {
            let it = (api.create_iterator)(self.db.db, self.ro);
            let k = key.as_ptr().cast();
            if forward {
                (api.iter_seek)(it, k, key.len());
            } else {
                (api.iter_seek_for_prev)(it, k, key.len());
            }
            let (mut kl, mut vl) = (0usize, 0usize);
            while read < n && (api.iter_valid)(it) != 0 {
                std::hint::black_box((api.iter_key)(it, &mut kl));
                std::hint::black_box((api.iter_value)(it, &mut vl));
                read += 1;
                if forward {
                    (api.iter_next)(it);
                } else {
                    (api.iter_prev)(it);
                }
            }
            (api.iter_get_error)(it, &mut err);
            (api.iter_destroy)(it);
        }
        api.check(err).map_err(|e| db_error("iterate", e))?;
        Ok(read)
    }
}

impl KvConn for RocksConn {
    /// A one-entry batch reused across puts, as db_bench writes: rocksdb_put would build
    /// and free a new batch buffer on every call.
    fn put(&mut self, key: &[u8], value: &[u8]) -> DbResult<()> {
        let (api, mut err) = (&self.db.api, std::ptr::null_mut());
        let (k, v) = (key.as_ptr().cast(), value.as_ptr().cast());
        // SAFETY: key and value are copied into the session's batch, written, cleared.
        unsafe {
            (api.writebatch_clear)(self.batch);
            (api.writebatch_put)(self.batch, k, key.len(), v, value.len());
            (api.write)(self.db.db, self.wo, self.batch, &mut err);
        }
        api.check(err).map_err(|e| db_error("put", e))
    }

    fn get(&mut self, key: &[u8]) -> DbResult<bool> {
        let (api, mut err) = (&self.db.api, std::ptr::null_mut());
        let k = key.as_ptr().cast();
        // SAFETY: the pinned slice is read and freed before returning.
        let ps = unsafe { (api.get_pinned)(self.db.db, self.ro, k, key.len(), &mut err) };
        api.check(err).map_err(|e| db_error("get", e))?;
        if ps.is_null() {
            return Ok(false);
        }
        let mut len = 0usize;
        unsafe {
            std::hint::black_box((api.pinnableslice_value)(ps, &mut len));
            (api.pinnableslice_destroy)(ps);
        }
        Ok(true)
    }

    fn seek_next(&mut self, key: &[u8], n: u64) -> DbResult<u64> {
        self.scan(key, n, true)
    }

    fn seek_prev(&mut self, key: &[u8], n: u64) -> DbResult<u64> {
        self.scan(key, n, false)
    }
}
