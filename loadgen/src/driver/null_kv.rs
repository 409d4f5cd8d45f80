//! The null driver's key-value store: an ordered set of keys in memory, each operation
//! after the scripted latency. It starts with keys 0..keys-1 for every step but fillseq,
//! as if an earlier fillseq had run, so each step can be tested on its own.

use super::kv::{encode_key, key_buffer, EngineSnapshot, KvConn, KvStore, WriteMode};
use super::null_script::Script;
use super::DbResult;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

pub struct NullKv {
    script: Arc<Script>,
    keys: Arc<Mutex<BTreeSet<Vec<u8>>>>,
}

impl NullKv {
    /// `prefill` keys of `key_size` bytes are present from the start.
    pub fn new(script: Arc<Script>, prefill: u64, key_size: usize) -> NullKv {
        let mut keys = BTreeSet::new();
        let mut k = key_buffer(key_size);
        for n in 0..prefill {
            encode_key(n, &mut k);
            keys.insert(k.clone());
        }
        NullKv {
            script,
            keys: Arc::new(Mutex::new(keys)),
        }
    }
}

impl KvStore for NullKv {
    fn session(&self, _mode: WriteMode) -> DbResult<Box<dyn KvConn>> {
        Ok(Box::new(NullKvConn {
            script: self.script.clone(),
            keys: self.keys.clone(),
        }))
    }

    fn flush(&self) -> DbResult<()> {
        self.script.pause();
        Ok(())
    }

    fn compact_l0(&self) -> DbResult<()> {
        self.script.pause();
        Ok(())
    }

    fn wait_for_compaction(&self, _stop: &AtomicBool) -> DbResult<()> {
        self.script.pause();
        Ok(())
    }

    fn snapshot(&self) -> DbResult<EngineSnapshot> {
        Ok(EngineSnapshot::default())
    }
}

struct NullKvConn {
    script: Arc<Script>,
    keys: Arc<Mutex<BTreeSet<Vec<u8>>>>,
}

impl KvConn for NullKvConn {
    fn put(&mut self, key: &[u8], _value: &[u8]) -> DbResult<()> {
        self.script.data_op()?;
        self.keys.lock().unwrap().insert(key.to_vec());
        Ok(())
    }

    fn get(&mut self, key: &[u8]) -> DbResult<bool> {
        self.script.data_op()?;
        Ok(self.keys.lock().unwrap().contains(key))
    }

    fn seek_next(&mut self, key: &[u8], n: u64) -> DbResult<u64> {
        self.script.data_op()?;
        let keys = self.keys.lock().unwrap();
        Ok(keys.range(key.to_vec()..).take(n as usize).count() as u64)
    }

    fn seek_prev(&mut self, key: &[u8], n: u64) -> DbResult<u64> {
        self.script.data_op()?;
        let keys = self.keys.lock().unwrap();
        Ok(keys.range(..=key.to_vec()).rev().take(n as usize).count() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_key_order() {
        let kv = NullKv::new(Arc::new(Script::new(0, 0)), 100, 16);
        let mut s = kv
            .session(WriteMode {
                disable_wal: true,
                sync: false,
            })
            .unwrap();
        let mut k = key_buffer(16);
        encode_key(95, &mut k);
        assert_eq!(s.seek_next(&k, 10).unwrap(), 5);
        assert_eq!(s.seek_prev(&k, 10).unwrap(), 10);
        encode_key(3, &mut k);
        assert_eq!(s.seek_prev(&k, 10).unwrap(), 4);
        assert!(s.get(&k).unwrap());
        encode_key(100, &mut k);
        assert!(!s.get(&k).unwrap());
        s.put(&k, b"v").unwrap();
        assert!(s.get(&k).unwrap());
    }
}
