//! The null driver's key-value store: an ordered set of keys in memory, each operation
//! after the scripted latency. It starts with keys 0..keys-1 for every step but fillseq,
//! as if an earlier fillseq had run, so each step can be tested on its own.

use super::kv::{key_buffer, EngineSnapshot, KvConn, KvStore, WriteMode};
use super::null_bits::Bits;
use super::null_script::Script;
use super::DbResult;
use std::collections::BTreeSet;
use std::ops::Bound::{Included, Unbounded};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

/// The set of keys, in byte order. The keys the kv workload writes, `encode_key(n)` at
/// the store's key length for n below `keys`, are bits of a bitmap by n, so a get
/// costs a load; any other key goes to an ordered set. A range read counts in both
/// (the two never hold the same key, and only counts are asked for).
struct KeySet {
    /// The length of the workload's keys (`key_buffer`'s).
    len: usize,
    dense: Bits,
    other: BTreeSet<Vec<u8>>,
}

/// The first 8 bytes of `key` as a big-endian number, zero-padded.
fn prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl KeySet {
    fn new(keys: u64, prefilled: bool, key_size: usize) -> KeySet {
        let mut dense = Bits::new(keys);
        if prefilled {
            dense.set_range(0, keys);
        }
        KeySet {
            len: key_buffer(key_size).len(),
            dense,
            other: BTreeSet::new(),
        }
    }

    /// n when `key` is `encode_key(n)` at the workload's length and n is in the bitmap.
    fn dense(&self, key: &[u8]) -> Option<u64> {
        let is_encoded = key.len() == self.len && key[8..].iter().all(|&b| b == 0);
        let n = prefix(key);
        (is_encoded && n < self.dense.len()).then_some(n)
    }

    fn contains(&self, key: &[u8]) -> bool {
        match self.dense(key) {
            Some(n) => self.dense.get(n),
            None => self.other.contains(key),
        }
    }

    fn insert(&mut self, key: &[u8]) {
        match self.dense(key) {
            Some(n) => {
                self.dense.set(n, true);
            }
            None => {
                self.other.insert(key.to_vec());
            }
        }
    }

    /// The smallest n whose encoded key is >= `key`, None when none is. Encoded keys are
    /// `len` bytes: n's 8 big-endian bytes, then zeros.
    fn first_at_or_after(&self, key: &[u8]) -> Option<u64> {
        let p = prefix(key);
        let tail = key.get(8..).unwrap_or_default();
        // encode(p) >= key unless key goes on past encode(p)'s zeros or above them.
        if tail.len() <= self.len - 8 && tail.iter().all(|&b| b == 0) {
            Some(p)
        } else {
            p.checked_add(1)
        }
    }

    /// The largest n whose encoded key is <= `key`, None when none is.
    fn last_at_or_before(&self, key: &[u8]) -> Option<u64> {
        let p = prefix(key);
        let tail = key.get(8..).unwrap_or_default();
        // encode(p) <= key unless key is a proper prefix of it (p's bytes, fewer zeros).
        let shorter = key.len() < 8 || (tail.len() < self.len - 8 && tail.iter().all(|&b| b == 0));
        if shorter {
            p.checked_sub(1)
        } else {
            Some(p)
        }
    }

    /// Keys >= `key`, at most `limit`.
    fn count_from(&self, key: &[u8], limit: u64) -> u64 {
        let dense = self
            .first_at_or_after(key)
            .map_or(0, |n| self.dense.count_up(n, limit));
        let other = self.other.range::<[u8], _>((Included(key), Unbounded));
        (dense + other.take(limit as usize).count() as u64).min(limit)
    }

    /// Keys <= `key`, at most `limit`.
    fn count_to(&self, key: &[u8], limit: u64) -> u64 {
        let dense = self
            .last_at_or_before(key)
            .map_or(0, |n| self.dense.count_down(n, limit));
        let other = self.other.range::<[u8], _>((Unbounded, Included(key)));
        (dense + other.rev().take(limit as usize).count() as u64).min(limit)
    }
}

/// The keys, shared by every session: reads share the lock, and a put of a key already
/// there only reads.
type Keys = Arc<RwLock<KeySet>>;

pub struct NullKv {
    script: Arc<Script>,
    keys: Keys,
}

impl NullKv {
    /// Room for keys 0..keys of `key_size` bytes (others are kept too, less cheaply),
    /// all of them present from the start when `prefilled`.
    pub fn new(script: Arc<Script>, keys: u64, prefilled: bool, key_size: usize) -> NullKv {
        NullKv {
            script,
            keys: Arc::new(RwLock::new(KeySet::new(keys, prefilled, key_size))),
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
    keys: Keys,
}

impl KvConn for NullKvConn {
    /// Copies the key only when it is new.
    fn put(&mut self, key: &[u8], _value: &[u8]) -> DbResult<()> {
        self.script.data_op()?;
        if !self.keys.read().unwrap().contains(key) {
            self.keys.write().unwrap().insert(key);
        }
        Ok(())
    }

    fn get(&mut self, key: &[u8]) -> DbResult<bool> {
        self.script.data_op()?;
        Ok(self.keys.read().unwrap().contains(key))
    }

    fn seek_next(&mut self, key: &[u8], n: u64) -> DbResult<u64> {
        self.script.data_op()?;
        Ok(self.keys.read().unwrap().count_from(key, n))
    }

    fn seek_prev(&mut self, key: &[u8], n: u64) -> DbResult<u64> {
        self.script.data_op()?;
        Ok(self.keys.read().unwrap().count_to(key, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::kv::encode_key;
    use proptest::prelude::*;

    #[test]
    fn ranges_follow_key_order() {
        let kv = NullKv::new(Arc::new(Script::new(0, 0)), 100, true, 16);
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

    /// Keys near the encoded ones: encoded (some past the bitmap), shorter, longer, with
    /// a non-zero tail.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        let encoded = (0u64..80).prop_map(|n| {
            let mut k = key_buffer(12);
            encode_key(n, &mut k);
            k
        });
        let near = (
            0u64..80,
            0usize..16,
            proptest::collection::vec(0u8..3, 0..6),
        )
            .prop_map(|(n, len, tail)| {
                let mut k = n.to_be_bytes().to_vec();
                k.resize(len.max(1), 0);
                if len > 8 {
                    k.extend(tail);
                }
                k
            });
        prop_oneof![encoded, near]
    }

    proptest! {
        #[test]
        fn counts_match_an_ordered_set_of_bytes(
            keys in 0u64..64,
            prefilled in any::<bool>(),
            puts in proptest::collection::vec(key(), 0..40),
            probe in key(),
            limit in 0u64..70,
        ) {
            let mut set = KeySet::new(keys, prefilled, 12);
            let mut model: BTreeSet<Vec<u8>> = BTreeSet::new();
            if prefilled {
                for n in 0..keys {
                    let mut k = key_buffer(12);
                    encode_key(n, &mut k);
                    model.insert(k);
                }
            }
            for k in &puts {
                set.insert(k);
                model.insert(k.clone());
            }
            prop_assert_eq!(set.contains(&probe), model.contains(&probe));
            let from = model.range::<[u8], _>((Included(&probe[..]), Unbounded));
            prop_assert_eq!(set.count_from(&probe, limit), from.take(limit as usize).count() as u64);
            let to = model.range::<[u8], _>((Unbounded, Included(&probe[..])));
            prop_assert_eq!(set.count_to(&probe, limit), to.rev().take(limit as usize).count() as u64);
        }
    }
}
