//! A point threads wait at until another opens it, once, with a value: the step's start
//! and its checks (context.rs), the edges of a profiler's window (window.rs).

use crate::control::POLL;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};

/// A point every client waits at until the reporter opens it with a value.
pub struct Gate<T> {
    value: Mutex<Option<T>>,
    cv: Condvar,
}

impl<T: Copy> Gate<T> {
    pub fn new() -> Self {
        Gate {
            value: Mutex::new(None),
            cv: Condvar::new(),
        }
    }

    pub fn open(&self, value: T) {
        *self.value.lock().unwrap() = Some(value);
        self.cv.notify_all();
    }

    /// The gate's value once open; None if the step stops first.
    pub fn wait(&self, stop: &AtomicBool) -> Option<T> {
        let mut value = self.value.lock().unwrap();
        while value.is_none() && !stop.load(Relaxed) {
            value = self.cv.wait_timeout(value, POLL).unwrap().0;
        }
        *value
    }
}
