//! A step run in slices (the spec's `slices`), so a caller running two loadgens, one
//! per build, can let them take turns and both see the same host: after each slice no
//! driver call is in flight anywhere, the step's own clock (clock.rs) stands still, and
//! the loadgen waits for the caller's `run`.
//!
//! Every driver call passes the gate in `Worker::call`: it counts itself in flight,
//! then looks at `pausing`; set, it counts itself out and waits for the next slice. The
//! reporter ends a slice by time (own time, `ms`), a call by Q calls begun (`q_calls`):
//! either sets `pausing`, and the last call to leave (or the reporter, with none in
//! flight) stops the clock under the lock. Both sides use SeqCst: a call that counted
//! itself in before `pausing` was set is waited for; one that counted itself in after
//! sees it.

use crate::clock::StepClock;
use crate::control::POLL;
use crate::output::QUnit;
pub use crate::slice_spec::SliceSpec;
use crate::stats::{CachePadded, OpKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the reporter and the calls share about the slices.
pub struct Slices {
    pub spec: SliceSpec,
    q_op: OpKind,
    q_unit: QUnit,
    /// Driver calls between the gate and their end (busy-wait of inject_slowdown included).
    inflight: CachePadded<AtomicU64>,
    /// The slice is over (or not begun): no call may start.
    pausing: CachePadded<AtomicBool>,
    /// Q calls begun in this slice (q_calls only).
    begun: CachePadded<AtomicU64>,
    /// Units of Q ended in this slice: counted in the summary, and all.
    q: CachePadded<[AtomicU64; 2]>,
    /// The timed work is over: the gate lets every call through.
    over: AtomicBool,
    /// Whether the clock stands still (every call has left), under the lock.
    settled: Mutex<bool>,
    cv: Condvar,
}

/// A call's passage through the gate; it leaves when dropped.
pub struct Pass<'a> {
    slices: &'a Slices,
    clock: &'a StepClock,
    /// Own time it waited at the gate for a slice to begin.
    pub waited: Duration,
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.slices.leave(self.clock);
    }
}

impl Slices {
    pub fn new(spec: SliceSpec, q_op: OpKind, q_unit: QUnit) -> Slices {
        Slices {
            spec,
            q_op,
            q_unit,
            inflight: CachePadded(AtomicU64::new(0)),
            pausing: CachePadded(AtomicBool::new(false)),
            begun: CachePadded(AtomicU64::new(0)),
            q: CachePadded([AtomicU64::new(0), AtomicU64::new(0)]),
            over: AtomicBool::new(false),
            settled: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    /// Before a driver call of kind `op`: wait until a slice runs and the call may start
    /// in it. `announce` is called when this call's Q count ended the slice. None when
    /// the step stopped meanwhile.
    pub fn enter<'a>(
        &'a self,
        op: OpKind,
        clock: &'a StepClock,
        stop: &AtomicBool,
        announce: impl Fn(),
    ) -> Option<Pass<'a>> {
        let mut arrived = None;
        loop {
            self.inflight.fetch_add(1, SeqCst);
            if !self.pausing.load(SeqCst) && (op != self.q_op || self.take_q_call(&announce)) {
                let waited = arrived.map_or(Duration::ZERO, |a: Instant| {
                    clock.now().saturating_duration_since(a)
                });
                return Some(Pass {
                    slices: self,
                    clock,
                    waited,
                });
            }
            arrived.get_or_insert_with(|| clock.now());
            self.leave(clock);
            if !self.wait_for_slice(stop) {
                return None;
            }
        }
    }

    /// A Q call may begin in this slice; the one reaching q_calls ends it.
    fn take_q_call(&self, announce: &impl Fn()) -> bool {
        let Some(limit) = self.spec.q_calls else {
            return true;
        };
        if self.over.load(Relaxed) {
            return true;
        }
        let n = self.begun.fetch_add(1, SeqCst) + 1;
        if n >= limit && self.end_slice() {
            announce();
        }
        n <= limit
    }

    /// No call may start until the next slice; true for the caller that ended it.
    pub fn end_slice(&self) -> bool {
        !self.over.load(SeqCst) && !self.pausing.swap(true, SeqCst)
    }

    /// Is the slice over (by Q calls, or the reporter ended it)?
    pub fn pausing(&self) -> bool {
        self.pausing.load(SeqCst)
    }

    fn leave(&self, clock: &StepClock) {
        if self.inflight.fetch_sub(1, SeqCst) == 1 && self.pausing.load(SeqCst) {
            self.settle(clock);
        }
    }

    /// With the slice over and no call in flight, stop the clock: the slice ends now.
    pub fn settle(&self, clock: &StepClock) {
        let mut settled = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        if !*settled && self.pausing.load(SeqCst) && self.inflight.load(SeqCst) == 0 {
            clock.freeze();
            *settled = true;
            self.cv.notify_all();
        }
    }

    /// Wait up to `wait` for the slice's last call to end; true once it has.
    pub fn wait_settled(&self, wait: Duration) -> bool {
        let settled = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        if *settled {
            return true;
        }
        let (settled, _) = self
            .cv
            .wait_timeout(settled, wait)
            .unwrap_or_else(|e| e.into_inner());
        *settled
    }

    /// Before the first slice: nothing runs, the clock stands still at `at` (go).
    pub fn hold(&self, clock: &StepClock, at: Instant) {
        let mut settled = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        self.pausing.store(true, SeqCst);
        clock.freeze_at(at);
        *settled = true;
    }

    /// The caller said run: the next slice begins, the clock runs on.
    pub fn resume(&self, clock: &StepClock) {
        let mut settled = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        self.begun.store(0, SeqCst);
        clock.resume();
        *settled = false;
        self.pausing.store(false, SeqCst);
        self.cv.notify_all();
    }

    /// Every client's timed part ended: no slice ends any more, no call waits, and the
    /// clock runs (a slice its Q calls ended may have stopped it as the work ended).
    pub fn finish(&self, clock: &StepClock) {
        let mut settled = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        self.over.store(true, SeqCst);
        if *settled {
            clock.resume();
            *settled = false;
        }
        self.pausing.store(false, SeqCst);
        self.cv.notify_all();
    }

    /// Wait until a slice runs; false when the step stops first.
    fn wait_for_slice(&self, stop: &AtomicBool) -> bool {
        let mut settled = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        while self.pausing.load(SeqCst) && !stop.load(Relaxed) {
            settled = self
                .cv
                .wait_timeout(settled, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        !stop.load(Relaxed)
    }

    /// A call of kind `op` ended well with `rows`; `measured`: after the warm-up.
    pub fn ended(&self, op: OpKind, rows: u64, measured: bool) {
        if op != self.q_op {
            return;
        }
        let units = match self.q_unit {
            QUnit::Rows => rows,
            QUnit::Ops => 1,
        };
        if measured {
            self.q[0].fetch_add(units, Relaxed);
        }
        self.q[1].fetch_add(units, Relaxed);
    }

    /// Units of Q ended since the last take: (counted in the summary, all).
    pub fn take_q(&self) -> (u64, u64) {
        (self.q[0].swap(0, SeqCst), self.q[1].swap(0, SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn spec(ms: Option<u64>, q_calls: Option<u64>) -> SliceSpec {
        SliceSpec { ms, q_calls }
    }

    fn error(s: SliceSpec, handshake: bool) -> String {
        s.validate(handshake).unwrap_err().to_string()
    }

    #[test]
    fn a_spec_takes_exactly_one_limit_above_zero() {
        assert!(spec(Some(100), None).validate(true).is_ok());
        assert!(spec(None, Some(5000)).validate(true).is_ok());
        assert!(error(spec(Some(100), None), false).contains("needs the handshake"));
        assert!(error(spec(Some(1), Some(1)), true).contains("not both"));
        assert!(error(spec(None, None), true).contains("needs one of ms"));
        assert!(error(spec(Some(0), None), true).contains("slices.ms must be at least 1"));
        assert!(error(spec(None, Some(0)), true).contains("q_calls must be at least 1"));
        assert_eq!(
            spec(Some(50), None).length(),
            Some(Duration::from_millis(50))
        );
    }

    #[test]
    fn q_calls_end_the_slice_and_count_their_units() {
        let s = Slices::new(spec(None, Some(3)), OpKind::Insert, QUnit::Rows);
        let (clock, stop) = (StepClock::new(), AtomicBool::new(false));
        let announced = AtomicU64::new(0);
        let announce = || {
            announced.fetch_add(1, SeqCst);
        };
        for i in 0..3 {
            // Other kinds pass freely while the slice runs.
            drop(s.enter(OpKind::Delete, &clock, &stop, announce).unwrap());
            let p = s.enter(OpKind::Insert, &clock, &stop, announce).unwrap();
            assert_eq!(s.pausing(), i == 2, "the third Q call ends the slice");
            s.ended(OpKind::Insert, 10, i > 0);
            s.ended(OpKind::Delete, 10, true);
            drop(p);
        }
        assert_eq!(announced.load(SeqCst), 1);
        assert!(
            s.wait_settled(Duration::ZERO),
            "the last call left: settled"
        );
        assert_eq!(s.take_q(), (20, 30));
        let stood = clock.now();
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(clock.now(), stood, "the clock stands still between slices");
        s.resume(&clock);
        assert!(!s.pausing());
        drop(s.enter(OpKind::Insert, &clock, &stop, announce).unwrap());
        assert_eq!(s.take_q(), (0, 0));
    }

    #[test]
    fn a_call_waits_for_the_next_slice_and_its_wait_is_not_its_latency() {
        let s = Arc::new(Slices::new(spec(Some(10), None), OpKind::Get, QUnit::Ops));
        let clock = Arc::new(StepClock::new());
        let stop = Arc::new(AtomicBool::new(false));
        let inside = s.enter(OpKind::Get, &clock, &stop, || {}).unwrap();
        assert!(s.end_slice());
        s.settle(&clock);
        assert!(!s.wait_settled(Duration::ZERO), "a call is in flight");
        let (s2, c2, st2) = (s.clone(), clock.clone(), stop.clone());
        let t = std::thread::spawn(move || {
            s2.enter(OpKind::Get, &c2, &st2, || {})
                .map(|p| p.waited)
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!t.is_finished(), "no call starts once the slice is over");
        drop(inside);
        assert!(s.wait_settled(Duration::from_secs(1)));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!t.is_finished());
        s.resume(&clock);
        let waited = t.join().unwrap();
        // 20 ms of own time until the last call left; the 50 ms paused do not count.
        assert!(
            waited >= Duration::from_millis(15) && waited < Duration::from_millis(45),
            "{waited:?}"
        );
    }

    #[test]
    fn a_stop_frees_the_waiting_calls_and_finish_opens_the_gate() {
        let s = Arc::new(Slices::new(spec(None, Some(1)), OpKind::Get, QUnit::Ops));
        let clock = Arc::new(StepClock::new());
        let stop = Arc::new(AtomicBool::new(false));
        s.hold(&clock, Instant::now());
        let (s2, c2, st2) = (s.clone(), clock.clone(), stop.clone());
        let t = std::thread::spawn(move || s2.enter(OpKind::Get, &c2, &st2, || {}).is_some());
        std::thread::sleep(Duration::from_millis(20));
        stop.store(true, SeqCst);
        assert!(!t.join().unwrap(), "stopped while waiting");
        stop.store(false, SeqCst);
        s.finish(&clock);
        let t = clock.now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(clock.now() > t, "the clock runs again");
        for _ in 0..3 {
            assert!(s.enter(OpKind::Get, &clock, &stop, || {}).is_some());
        }
        assert!(!s.pausing());
    }
}
