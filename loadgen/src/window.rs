//! The profiler's window (`window` in the step spec, for `dbregress explain`): a fixed
//! number of the step's Q operations, counted over every client, with the loadgen
//! paused at both edges so the caller can zero and read a profiler's counters while no
//! operation is in flight. The window is also its own pacing clock: paced writers may
//! follow the Q operations instead of wall time, so a profiler's slowdown leaves the
//! mix of reads and writes as the measured run had it.
//!
//! The Q call at index `skip_ops` (0-based) waits until every earlier Q call has ended,
//! then the edge `open` is announced and the call waits until the caller answers; the
//! call at index `skip_ops + ops` does the same for `close`. A step that runs for a
//! duration ends at the close; a fixed-work step goes on with its work after it.
//!
//! An embedded engine's counters (RocksDB's statistics: block-cache hits and misses,
//! ...) are read at both edges, outside the counted calls (before the open is announced,
//! after the close is answered), and their deltas go into the summary as
//! `window_engine_stats`: the caller checks that the window met the engine in the state
//! the measured run had (a warm block cache, say).

use crate::engine_stats::{EngineSnapshot, EngineStats};
use crate::gate::Gate;
use crate::stats::OpKind;
use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a call waiting for the calls before it to end sleeps between looks.
const SETTLE: Duration = Duration::from_micros(200);

/// For profiling (dbregress explain): a window of `ops` calls of the step's Q operation,
/// counted over every client, after `skip_ops` of them. With the handshake only. At each
/// edge every earlier Q call has ended and the loadgen prints 'window' (edge open, then
/// close) and waits for the line open, then close, on stdin. A step that runs for a
/// duration ends at the close (its duration and warmup_s do not apply); a fixed-work
/// step does all its work, the window inside it.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// Q calls before the window (a profiler's warm-up)
    #[serde(default)]
    pub skip_ops: u64,
    /// Q calls in the window
    #[schemars(range(min = 1))]
    pub ops: u64,
    /// 0, or the last this many of the skip_ops calls are a profiler's own warm-up: at
    /// the first of them the edge `warm` is announced and waited for like the others
    /// (the cost lane switches its instrumentation on there, so the calls before run at
    /// the profiler's uninstrumented speed). At most skip_ops
    #[serde(default)]
    pub warm_ops: u64,
    /// 0: paced writers keep to wall time. Above 0: their clock advances 1/q_per_s
    /// seconds per Q call begun, so under a profiler that slows everything the writes
    /// keep the ratio to Q calls they had in a run at q_per_s
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub q_per_s: f64,
    /// 0, or warm until the engine's cache is as warm as the timed window's: every
    /// `probe_every` Q calls before the warm edge, the embedded engine's block-cache
    /// data hits and misses are read (between two calls, nothing in flight), and at the
    /// first probe whose stretch since the one before hit at least this rate (0-1), the
    /// warm edge (or, without warm_ops, the open) comes at that call. skip_ops stays the
    /// latest it comes. One client, an engine with statistics (RocksDB) only
    #[serde(default)]
    #[schemars(range(min = 0, max = 1))]
    pub until_hit_rate: f64,
    /// With until_hit_rate: Q calls between two probes
    #[serde(default)]
    pub probe_every: u64,
}

impl WindowSpec {
    pub fn validate(&self, handshake: bool) -> Result<()> {
        if !handshake {
            bail!("window needs the handshake (handshake: true)");
        }
        if self.ops == 0 {
            bail!("window.ops must be at least 1");
        }
        if self.warm_ops > self.skip_ops {
            bail!(
                "window.warm_ops ({}) must be at most skip_ops ({})",
                self.warm_ops,
                self.skip_ops
            );
        }
        if !(self.q_per_s >= 0.0 && self.q_per_s.is_finite()) {
            bail!("window.q_per_s must be a number >= 0, got {}", self.q_per_s);
        }
        if !(0.0..=1.0).contains(&self.until_hit_rate) {
            bail!(
                "window.until_hit_rate must be a rate from 0 to 1, got {}",
                self.until_hit_rate
            );
        }
        if self.until_hit_rate > 0.0 && self.probe_every == 0 {
            bail!("window.until_hit_rate needs probe_every (Q calls between probes) >= 1");
        }
        Ok(())
    }

    /// Whether the window may open early (until_hit_rate).
    pub fn probes(&self) -> bool {
        self.until_hit_rate > 0.0
    }
}

/// Block-cache data hits and misses so far (the counters a probe reads).
pub type CacheCounts = (f64, f64);

/// Which edge of the window a call reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    Warm,
    Open,
    Close,
}

impl Edge {
    /// The event's `edge`, and the line the caller answers with.
    pub fn word(self) -> &'static str {
        match self {
            Edge::Warm => "warm",
            Edge::Open => "open",
            Edge::Close => "close",
        }
    }
}

/// What a Q call may do once it passed the window's edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Run; `inside` says whether it counts in the window.
    Run { inside: bool },
    /// The window closed and the step runs for a duration: the step is over.
    Over,
}

pub struct Window {
    pub spec: WindowSpec,
    /// The step's Q kind: only its calls count.
    pub q_op: OpKind,
    /// A step that runs for a duration ends when the window closes.
    ends_step: bool,
    started: AtomicU64,
    ended: AtomicU64,
    /// Calls and rows inside the window, once ended.
    inside_ops: AtomicU64,
    inside_rows: AtomicU64,
    warmed: Gate<()>,
    opened: Gate<()>,
    closed: Gate<()>,
    /// The caller has answered the close (or the window will never close).
    pub over: AtomicBool,
    /// An embedded engine's counters at the open (and when, in seconds since go), then
    /// their deltas over the window once it closed.
    engine: Mutex<EngineWindow>,
    /// Q calls before the open: spec.skip_ops, or less once a probe found the cache
    /// warm (until_hit_rate; one client, so only the probing call moves it).
    skip: AtomicU64,
    /// The counters at the last probe.
    probed: Mutex<Option<CacheCounts>>,
}

/// The engine's counters at the window's open (and when), then its deltas.
#[derive(Default)]
struct EngineWindow {
    open: Option<(EngineSnapshot, f64)>,
    stats: Option<EngineStats>,
}

impl Window {
    pub fn new(spec: WindowSpec, q_op: OpKind, ends_step: bool) -> Window {
        Window {
            spec,
            q_op,
            ends_step,
            started: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            inside_ops: AtomicU64::new(0),
            inside_rows: AtomicU64::new(0),
            warmed: Gate::new(),
            opened: Gate::new(),
            closed: Gate::new(),
            over: AtomicBool::new(false),
            engine: Mutex::new(EngineWindow::default()),
            skip: AtomicU64::new(spec.skip_ops),
            probed: Mutex::new(None),
        }
    }

    /// Q calls before the open: skip_ops, or fewer when a probe opened it early.
    pub fn skip_ops(&self) -> u64 {
        self.skip.load(SeqCst)
    }

    /// Call `i`, before it runs, with until_hit_rate: on a probe's call, read the
    /// counters and, when the stretch since the last probe hit at least the rate, move
    /// the warm edge (or the open) to this call.
    fn probe(&self, i: u64, counts: impl FnOnce() -> Option<CacheCounts>) {
        if !self.spec.probes() || !i.is_multiple_of(self.spec.probe_every.max(1)) {
            return; // every other call: one comparison, no atomic read
        }
        if i + self.spec.warm_ops >= self.skip.load(SeqCst) {
            return;
        }
        let Some(now) = counts() else { return };
        let mut last = self.probed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((hits, misses)) = *last {
            let (h, m) = (now.0 - hits, now.1 - misses);
            if h + m > 0.0 && h / (h + m) >= self.spec.until_hit_rate {
                self.skip.store(i + self.spec.warm_ops, SeqCst);
            }
        }
        *last = Some(now);
    }

    /// The engine's counters at the open, `t_s` seconds after go.
    pub fn engine_at_open(&self, snapshot: Option<EngineSnapshot>, t_s: f64) {
        let mut e = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        e.open = snapshot.map(|s| (s, t_s));
    }

    /// The engine's counters at the close, `t_s` seconds after go: the window's deltas.
    pub fn engine_at_close(&self, snapshot: Option<EngineSnapshot>, t_s: f64) {
        let mut e = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some((before, t0)), Some(after)) = (&e.open, snapshot) {
            e.stats = Some(EngineStats::between(before, &after, (t_s - t0).max(0.0)));
        }
    }

    /// The engine's counters' deltas over the window, once it closed (embedded only).
    pub fn engine_stats(&self) -> Option<EngineStats> {
        let e = self.engine.lock().unwrap_or_else(|e| e.into_inner());
        e.stats.clone()
    }

    /// Before a Q call: take its index, announce an edge it reaches (`announce` returns
    /// once the caller was told), and wait for the window's state it needs. None when
    /// the step stopped meanwhile.
    /// `counts` reads the engine's block-cache counters for a probe (until_hit_rate).
    pub fn begin(
        &self,
        stop: &AtomicBool,
        announce: impl FnOnce(Edge),
        counts: impl FnOnce() -> Option<CacheCounts>,
    ) -> Option<Slot> {
        let i = self.started.fetch_add(1, SeqCst);
        self.probe(i, counts);
        let skip = self.skip.load(SeqCst);
        let end = skip + self.spec.ops;
        let warm = (self.spec.warm_ops > 0).then(|| skip - self.spec.warm_ops);
        if i == skip || i == end || Some(i) == warm {
            let edge = if Some(i) == warm {
                Edge::Warm
            } else if i == skip {
                Edge::Open
            } else {
                Edge::Close
            };
            // Every earlier call has ended: nothing is in flight at the edge.
            while self.ended.load(SeqCst) < i {
                if stop.load(SeqCst) {
                    return None;
                }
                std::thread::sleep(SETTLE);
            }
            announce(edge);
        }
        if i < skip {
            if warm.is_some_and(|w| i >= w) {
                return self.warmed.wait(stop).map(|()| Slot::Run { inside: false });
            }
            return Some(Slot::Run { inside: false });
        }
        if i < end {
            return self.opened.wait(stop).map(|()| Slot::Run { inside: true });
        }
        self.closed.wait(stop)?;
        Some(if self.ends_step {
            Slot::Over
        } else {
            Slot::Run { inside: false }
        })
    }

    /// After a Q call that `begin` let run: `rows` it did (None after an error).
    pub fn end(&self, slot: Slot, rows: Option<u64>) {
        if slot == (Slot::Run { inside: true }) {
            self.inside_ops.fetch_add(1, SeqCst);
            self.inside_rows.fetch_add(rows.unwrap_or(0), SeqCst);
        }
        self.ended.fetch_add(1, SeqCst);
    }

    /// The caller answered an edge: let the waiting calls go.
    pub fn answered(&self, edge: Edge) {
        match edge {
            Edge::Warm => self.warmed.open(()),
            Edge::Open => self.opened.open(()),
            Edge::Close => {
                self.over.store(true, SeqCst);
                self.closed.open(());
            }
        }
    }

    /// The window closed and it ends the step (one that runs for a duration).
    pub fn ended_the_step(&self) -> bool {
        self.ends_step && self.over.load(SeqCst)
    }

    /// Did a call open the window? (The reporter closes an open window at the step's
    /// end when fewer Q calls than skip_ops + ops ran.)
    pub fn was_opened(&self) -> bool {
        self.started.load(SeqCst) > self.skip_ops()
    }

    /// Calls and rows counted inside the window so far.
    pub fn counted(&self) -> (u64, u64) {
        (self.inside_ops.load(SeqCst), self.inside_rows.load(SeqCst))
    }

    /// With `q_per_s`, the pacing clock: `start` plus 1/q_per_s per Q call started.
    pub fn clock(&self, start: Instant) -> Option<Instant> {
        (self.spec.q_per_s > 0.0).then(|| {
            let calls = self.started.load(SeqCst) as f64;
            start + Duration::from_secs_f64(calls / self.spec.q_per_s)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn window(skip_ops: u64, ops: u64, ends_step: bool) -> Window {
        let spec = WindowSpec {
            skip_ops,
            ops,
            warm_ops: 0,
            q_per_s: 0.0,
            until_hit_rate: 0.0,
            probe_every: 0,
        };
        Window::new(spec, OpKind::Get, ends_step)
    }

    /// `calls` Q calls on one client, each probe reading `counts(i)`: the edges seen.
    fn run_probed(w: &Window, calls: u64, counts: impl Fn(u64) -> CacheCounts) -> Vec<(u64, Edge)> {
        let stop = AtomicBool::new(false);
        let mut seen = vec![];
        for i in 0..calls {
            let announce = |e| {
                seen.push((i, e));
                w.answered(e);
            };
            let slot = w.begin(&stop, announce, || Some(counts(i))).unwrap();
            w.end(slot, Some(1));
        }
        seen
    }

    #[test]
    fn a_warm_cache_opens_the_window_at_the_first_probe_that_hits_the_rate() {
        let mut w = window(100, 2, false);
        w.spec.warm_ops = 3;
        w.spec.until_hit_rate = 0.9;
        w.spec.probe_every = 10;
        w.spec.validate(true).unwrap();
        // Cumulative (hits, misses) after call i: the first 30 calls hit half the
        // time, the rest always.
        let seen = run_probed(&w, 60, |i| {
            let hits = (i.min(30) / 2 + i.saturating_sub(30)) as f64;
            (hits, i as f64 - hits)
        });
        // Probes at 0 (the baseline), 10, 20, 30 (half), 40 (all hits since 30): the
        // warm edge at 40, the open 3 calls on.
        assert_eq!(
            seen,
            [(40, Edge::Warm), (43, Edge::Open), (45, Edge::Close)]
        );
        assert_eq!(w.skip_ops(), 43);
        let mut bad = w.spec;
        bad.probe_every = 0;
        assert!(bad.validate(true).is_err(), "a rate without a probe period");
        bad.probe_every = 10;
        bad.until_hit_rate = 1.5;
        assert!(bad.validate(true).is_err(), "a rate above 1");
    }

    #[test]
    fn a_cache_that_never_warms_opens_the_window_at_skip_ops() {
        let mut w = window(25, 1, false);
        w.spec.until_hit_rate = 0.99;
        w.spec.probe_every = 5;
        let seen = run_probed(&w, 30, |i| (i as f64 / 2.0, i as f64 / 2.0));
        assert_eq!(seen, [(25, Edge::Open), (26, Edge::Close)]);
        assert_eq!(w.skip_ops(), 25);
    }

    #[test]
    fn the_warm_edge_comes_warm_ops_before_the_open() {
        let mut w = window(5, 2, false);
        w.spec.warm_ops = 2;
        let stop = AtomicBool::new(false);
        let mut seen = vec![];
        for i in 0..9 {
            let slot = w
                .begin(
                    &stop,
                    |e| {
                        seen.push((i, e));
                        w.answered(e);
                    },
                    || None,
                )
                .unwrap();
            w.end(slot, Some(1));
        }
        assert_eq!(seen, [(3, Edge::Warm), (5, Edge::Open), (7, Edge::Close)]);
        assert_eq!(w.counted(), (2, 2));
        let mut bad = w.spec;
        bad.warm_ops = 6;
        assert!(bad.validate(true).is_err(), "warm_ops beyond skip_ops");
    }

    #[test]
    fn edges_come_at_the_counted_calls() {
        let w = window(2, 3, false);
        let stop = AtomicBool::new(false);
        let mut seen = vec![];
        for _ in 0..7 {
            let slot = w
                .begin(
                    &stop,
                    |e| {
                        seen.push(e);
                        w.answered(e);
                    },
                    || None,
                )
                .unwrap();
            w.end(slot, Some(10));
        }
        assert_eq!(seen, [Edge::Open, Edge::Close]);
        assert_eq!(w.counted(), (3, 30));
        assert!(w.over.load(SeqCst));
    }

    #[test]
    fn a_timed_step_is_over_at_the_close() {
        let w = window(0, 1, true);
        let stop = AtomicBool::new(false);
        let first = w.begin(&stop, |e| w.answered(e), || None).unwrap();
        assert_eq!(first, Slot::Run { inside: true });
        w.end(first, None);
        assert_eq!(w.begin(&stop, |e| w.answered(e), || None), Some(Slot::Over));
        assert_eq!(w.counted(), (1, 0));
    }

    #[test]
    fn calls_wait_for_the_answer_and_a_stop_frees_them() {
        let w = Arc::new(window(0, 5, false));
        let stop = Arc::new(AtomicBool::new(false));
        let (w2, stop2) = (w.clone(), stop.clone());
        // The first call announces the open, then waits, like every call inside.
        let t = std::thread::spawn(move || w2.begin(&stop2, |_| {}, || None));
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !t.is_finished(),
            "a call inside the window waits for the open"
        );
        w.answered(Edge::Open);
        let first = t.join().unwrap().unwrap();
        assert_eq!(first, Slot::Run { inside: true });
        w.end(first, Some(1));
        let (w3, stop3) = (w.clone(), stop.clone());
        let t = std::thread::spawn(move || {
            for _ in 0..4 {
                let _ = w3.begin(&stop3, |_| {}, || None);
            }
            w3.begin(&stop3, |_| {}, || None)
        });
        std::thread::sleep(Duration::from_millis(20));
        stop.store(true, SeqCst);
        assert_eq!(t.join().unwrap(), None, "the close never came: stopped");
    }

    #[test]
    fn engine_counters_are_the_deltas_between_the_edges() {
        let w = window(0, 1, true);
        let snap = |hits: f64| EngineSnapshot {
            counters: [("rocksdb.block.cache.data.hit".to_string(), hits)].into(),
            lsm_bytes: Some(7),
        };
        assert_eq!(w.engine_stats(), None, "nothing before the close");
        w.engine_at_close(Some(snap(5.0)), 1.0);
        assert_eq!(w.engine_stats(), None, "no open, no deltas");
        w.engine_at_open(Some(snap(100.0)), 1.0);
        w.engine_at_close(Some(snap(350.0)), 3.0);
        let s = w.engine_stats().unwrap();
        assert_eq!(s.statistics["rocksdb.block.cache.data.hit"], 250.0);
        assert_eq!(s.lsm_bytes, Some(7));
    }

    #[test]
    fn the_pacing_clock_follows_the_calls() {
        let mut w = window(0, 100, false);
        let t0 = Instant::now();
        assert_eq!(w.clock(t0), None, "wall time without q_per_s");
        w.spec.q_per_s = 10.0;
        assert_eq!(w.clock(t0), Some(t0));
        w.started.store(25, SeqCst);
        assert_eq!(w.clock(t0), Some(t0 + Duration::from_millis(2500)));
    }
}
