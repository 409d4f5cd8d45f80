//! The null driver's script, the one thing its SQL side (null.rs) and its key-value side
//! (null_kv.rs) share: the latency every operation sleeps, and the ignorable error of
//! every Nth data operation, counted over both sides.

use super::{DbError, DbResult};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

pub struct Script {
    latency: Duration,
    fail_every: u64,
    ops: AtomicU64,
}

impl Script {
    pub fn new(latency_us: u64, fail_every: u64) -> Script {
        Script {
            latency: Duration::from_micros(latency_us),
            fail_every,
            ops: AtomicU64::new(0),
        }
    }

    /// Sleep the scripted latency; fail if this is the Nth data operation. Without
    /// failures nothing is counted: the counter is shared by every thread.
    pub fn data_op(&self) -> DbResult<()> {
        self.pause();
        if self.fail_every == 0 {
            return Ok(());
        }
        let n = self.ops.fetch_add(1, Relaxed) + 1;
        if n.is_multiple_of(self.fail_every) {
            return Err(DbError::ignorable(format!(
                "null driver: injected error (operation {n})"
            )));
        }
        Ok(())
    }

    pub fn pause(&self) {
        if !self.latency.is_zero() {
            std::thread::sleep(self.latency);
        }
    }
}
