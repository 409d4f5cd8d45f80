//! The step's context: what every thread of a step shares (the spec, the driver, the
//! start and check gates, the channel to the reporter, the first fatal error), and each
//! thread's `Worker`, through which every driver call is timed. The runner (runner.rs)
//! builds it; workloads and the reporter use it without knowing the runner.

use crate::clock::StepClock;
use crate::driver::{Conn, DbResult, Driver, ErrorClass};
use crate::engine_stats::{EngineSnapshot, BLOCK_CACHE_DATA_HIT, BLOCK_CACHE_DATA_MISS};
use crate::fault::Fault;
use crate::gate::Gate;
use crate::outcome::{ClientOutcome, Histograms};
use crate::output::{ErrorLimiter, QUnit};
use crate::pace::{sleep_until, Pacing};
use crate::slices::Slices;
use crate::spec::StepSpec;
use crate::stats::{CachePadded, OpKind, Recorder, Stats};
use crate::window::{CacheCounts, Edge, Slot, Window};
use crate::workload_spec::Workload;
use anyhow::{anyhow, bail, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::mpsc::Sender;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a writer paced by the window's clock looks at it.
const CLOCK_POLL: Duration = Duration::from_millis(1);

/// What client threads tell the reporter.
pub enum Msg {
    Ready,
    /// A Q call reached an edge of the profiler's window and waits for the caller.
    Window(Edge),
    /// A Q call ended the slice (q_calls): the reporter waits for the calls in flight.
    Slice,
    /// Client n's timed part ended then; it waits at the check gate.
    Timed(u32, Instant),
    /// Client n finished; a client that sent no `Timed` ended its timed part with it.
    Done(u32, Box<ClientOutcome>),
    Fatal(anyhow::Error),
}

/// An operation failed with an error that ends the step.
#[derive(Debug)]
pub struct OpFailed {
    pub op: OpKind,
    pub message: String,
}

impl std::fmt::Display for OpFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.op.name(), self.message)
    }
}

impl std::error::Error for OpFailed {}

/// A client thread panicked: a bug, or an injected fault (fault.rs).
#[derive(Debug)]
pub struct ThreadPanicked {
    pub thread: String,
    pub message: String,
}

impl std::fmt::Display for ThreadPanicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "client thread {} panicked: {}",
            self.thread, self.message
        )
    }
}

impl std::error::Error for ThreadPanicked {}

impl ThreadPanicked {
    /// The current thread's panic, from the payload `catch_unwind` gave.
    fn here(payload: &(dyn std::any::Any + Send)) -> ThreadPanicked {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(a panic without a message)".into());
        let thread = std::thread::current()
            .name()
            .unwrap_or("(unnamed)")
            .to_string();
        ThreadPanicked { thread, message }
    }
}

/// What every thread of the step shares.
pub struct StepContext {
    pub spec: StepSpec,
    pub driver: Box<dyn Driver>,
    pub stats: Stats,
    /// Set on the first fatal error or signal; every loop checks it between operations,
    /// so it has its cache lines to itself (error counts and the reporter's locks are
    /// written next to it).
    pub stop: CachePadded<AtomicBool>,
    errors: ErrorLimiter,
    arrived: AtomicU32,
    /// Opens with the step's start (t = 0).
    pub start: Gate<Instant>,
    /// Opens when the end-of-step checks may run.
    pub checks: Gate<()>,
    pub(crate) tx: Sender<Msg>,
    /// DBREGRESS_LOADGEN_FAULT, parsed at start.
    fault: Option<Fault>,
    /// The profiler's window over the calls of Q (the spec's `window`).
    pub window: Option<Window>,
    /// The step's own clock: wall time less the pauses between slices.
    pub clock: StepClock,
    /// The spec's `slices`: the gate every driver call passes.
    pub slices: Option<Slices>,
    /// The server processes serving the clients' connections (`Conn::session_pid`),
    /// reported at `ready`.
    pub session_pids: Mutex<Vec<u32>>,
}

impl StepContext {
    /// Every thread's shared state for `spec` on `driver`; `tx` reaches the reporter,
    /// `fault` is what DBREGRESS_LOADGEN_FAULT asks for, `q` is the step's Q (its op
    /// kind and unit).
    pub fn new(
        spec: StepSpec,
        driver: Box<dyn Driver>,
        tx: Sender<Msg>,
        fault: Option<Fault>,
        (q_op, q_unit): (OpKind, QUnit),
    ) -> StepContext {
        let window = spec
            .window
            .map(|w| Window::new(w, q_op, spec.workload.runs_for_a_duration()));
        let slices = spec.slices.map(|s| Slices::new(s, q_op, q_unit));
        StepContext {
            window,
            clock: StepClock::new(),
            slices,
            spec,
            driver,
            stats: Stats::default(),
            stop: CachePadded(AtomicBool::new(false)),
            errors: ErrorLimiter::default(),
            arrived: AtomicU32::new(0),
            start: Gate::new(),
            checks: Gate::new(),
            tx,
            fault,
            session_pids: Mutex::new(Vec::new()),
        }
    }

    /// The engine's counters now, for its engine statistics: an embedded engine's (kv
    /// workload), or a SQL engine's buffer counters (engine_stats.rs), read for the
    /// step's sessions.
    pub fn engine_snapshot(&self) -> Result<Option<EngineSnapshot>> {
        let Some(kv) = self
            .driver
            .kv()
            .filter(|_| matches!(self.spec.workload, Workload::Kv(_)))
        else {
            return self.buffer_snapshot();
        };
        kv.snapshot()
            .map(Some)
            .map_err(|e| anyhow!("read the engine's statistics: {}", e.message))
    }

    /// A SQL engine's buffer counters now (none for a kv workload).
    fn buffer_snapshot(&self) -> Result<Option<EngineSnapshot>> {
        if !self.is_sql() {
            return Ok(None);
        }
        let pids = self
            .session_pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let counters = self
            .driver
            .buffer_counters(&pids)
            .map_err(|e| anyhow!("read the engine's buffer counters: {}", e.message))?;
        Ok(counters.map(|counters| EngineSnapshot {
            counters,
            lsm_bytes: None,
        }))
    }

    /// Whether the engine's counters are read inside a profiler's window edges (after
    /// the caller's open, before its close) rather than outside (Driver's
    /// counters_read_inside): a SQL engine whose counters are a kernel file.
    pub fn counters_read_inside(&self) -> bool {
        self.is_sql() && self.driver.counters_read_inside()
    }

    /// An engine read at the end of the timed part, before the checks' statements run:
    /// a SQL engine's buffer counters (the checks count rows, reading pages).
    pub fn reads_state_at_stop(&self) -> bool {
        self.is_sql()
    }

    /// A SQL workload (insert, micro): its engine's state is its buffer counters.
    fn is_sql(&self) -> bool {
        !matches!(self.spec.workload, Workload::Kv(_))
    }

    /// An embedded engine's block-cache data hits and misses now, for a window's probe
    /// (until_hit_rate); None without them (a read that fails is a probe skipped: the
    /// window then opens at its skip_ops).
    pub fn cache_counts(&self) -> Option<CacheCounts> {
        // the embedded store only: this probe runs between Q calls, where a SQL
        // engine's buffer counters (a statement, or /proc reads) have no place
        let kv = self.driver.kv().filter(|_| !self.is_sql())?;
        let snap = kv.snapshot().ok()?;
        let get = |k: &str| snap.counters.get(k).copied();
        Some((
            get(BLOCK_CACHE_DATA_HIT)?,
            get(BLOCK_CACHE_DATA_MISS).unwrap_or(0.0),
        ))
    }

    /// A new connection (setup, never timed); its server process is noted for `ready`.
    pub fn connect(&self) -> Result<Box<dyn Conn>> {
        let conn = self.driver.connect().map_err(|e| anyhow!(e.message))?;
        if let Some(pid) = conn.session_pid() {
            let mut pids = self.session_pids.lock().unwrap_or_else(|e| e.into_inner());
            pids.push(pid);
        }
        Ok(conn)
    }

    /// Tell the reporter this client is set up, then wait for the common start.
    pub fn ready_and_wait(&self) -> Option<Instant> {
        let _ = self.tx.send(Msg::Ready);
        self.start.wait(&self.stop)
    }

    /// Client `client`'s timed part ended at `end`: wait until the checks may run, so
    /// no check runs while another client is still timed, nor before the caller says.
    /// A client without checks need not call this: its outcome tells the same.
    pub fn stop_timing(&self, client: u32, end: Instant) -> Result<()> {
        let _ = self.tx.send(Msg::Timed(client, end));
        self.checks
            .wait(&self.stop)
            .ok_or_else(|| anyhow!("stopped before the checks"))
    }

    /// Report a thread's fatal error at once rather than when its client finishes.
    pub fn guard<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| self.fail(e))
    }

    /// Stop every thread and hand the reporter `e`, the step's end; what the caller
    /// returns instead.
    pub fn fail(&self, e: anyhow::Error) -> anyhow::Error {
        // Sent before the stop, so it reaches the reporter before what any thread
        // stopped by it might say.
        let _ = self.tx.send(Msg::Fatal(e));
        self.stop.store(true, Relaxed);
        anyhow!("reported by another thread")
    }

    /// Run `f`, a client thread's body; a panic in it is reported as the step's fatal
    /// error at once, naming this thread, and every other thread stops.
    pub fn catch_panics<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        catch_unwind(AssertUnwindSafe(f))
            .unwrap_or_else(|payload| Err(self.fail(ThreadPanicked::here(&*payload).into())))
    }

    /// Client `client`'s recorder and timer for one of its threads; `start` is the
    /// step's common start.
    pub fn worker(&self, client: u32, start: Instant) -> Worker<'_> {
        let warmup = self.spec.warmup();
        let fault = Fault::of_client(self.fault.as_ref(), client);
        if let Some(f) = fault {
            f.begin();
        }
        Worker {
            ctx: self,
            rec: self.stats.recorder(),
            start,
            measure_from: start + warmup,
            measuring: warmup.is_zero(),
            slowdown: self.spec.inject_slowdown,
            fault,
        }
    }

    /// True for exactly one caller: the last of the clients to call it.
    pub fn last_to_arrive(&self) -> bool {
        self.arrived.fetch_add(1, Relaxed) + 1 == self.spec.clients
    }

    /// The step's own time now (wall time without slices).
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Own seconds since `start`.
    pub fn t_s(&self, start: Instant) -> f64 {
        self.now().saturating_duration_since(start).as_secs_f64()
    }
}

/// One thread's view: its recorder, and the runner's timing of every driver call.
pub struct Worker<'a> {
    pub ctx: &'a StepContext,
    rec: Recorder,
    start: Instant,
    /// The end of the warm-up: operations ending before it are not summarized.
    measure_from: Instant,
    measuring: bool,
    /// inject_slowdown: the busy-wait after each call, as a fraction of the call.
    slowdown: f64,
    /// DBREGRESS_LOADGEN_FAULT, when it names this worker's client.
    fault: Option<&'a Fault>,
}

impl Worker<'_> {
    pub fn start(&self) -> Instant {
        self.start
    }

    /// The step's own time now.
    pub fn now(&self) -> Instant {
        self.ctx.now()
    }

    /// Run one driver call intended to start at `intended` (own time); latency counts
    /// from there, less any wait at the slices' gate. Returns the rows it reported (None
    /// after an ignorable error) and when the next operation may start: the call's end,
    /// or the end of the injected busy-wait.
    pub fn call(
        &mut self,
        op: OpKind,
        mut intended: Instant,
        f: impl FnOnce() -> DbResult<u64>,
    ) -> Result<(Option<u64>, Instant)> {
        let window = self.ctx.window.as_ref().filter(|w| w.q_op == op);
        let slot = match window {
            None => None,
            Some(w) => match w.begin(
                &self.ctx.stop,
                |e| drop(self.ctx.tx.send(Msg::Window(e))),
                || self.ctx.cache_counts(),
            ) {
                // A timed step's window closed: the step is over, this call does not run.
                Some(Slot::Over) => return Ok((None, self.ctx.now())),
                Some(slot) => Some(slot),
                None => bail!("stopped at the edge of the profiler's window"),
            },
        };
        // In flight from here to the end of the busy-wait: it leaves when dropped.
        let _pass = match &self.ctx.slices {
            None => None,
            Some(s) => {
                let announce = || drop(self.ctx.tx.send(Msg::Slice));
                let Some(pass) = s.enter(op, &self.ctx.clock, &self.ctx.stop, announce) else {
                    bail!("stopped between slices");
                };
                // Waiting for a slice to begin is not the engine's latency.
                intended += pass.waited;
                Some(pass)
            }
        };
        // The call's own start, read only when a slowdown needs it.
        let began = (self.slowdown > 0.0).then(|| self.ctx.now());
        let result = f();
        if let (Some(w), Some(slot)) = (window, slot) {
            w.end(slot, result.as_ref().ok().copied());
        }
        let done = self.ctx.now();
        if !self.measuring && done >= self.measure_from {
            self.rec.rebase();
            self.measuring = true;
        }
        let rows = match result {
            Ok(rows) => {
                let us = done.saturating_duration_since(intended).as_micros() as u64;
                self.rec.record_ok(op, us, rows);
                if let Some(s) = &self.ctx.slices {
                    s.ended(op, rows, self.measuring);
                }
                Some(rows)
            }
            Err(e) if e.class == ErrorClass::Ignorable => {
                self.rec.record_error(op);
                self.ctx
                    .errors
                    .report(self.ctx.t_s(self.start), op, &e.message);
                None
            }
            Err(e) => {
                return Err(OpFailed {
                    op,
                    message: e.message,
                }
                .into())
            }
        };
        if let Some(f) = self.fault {
            f.op_done();
        }
        Ok((rows, self.slow_down(began, done)))
    }

    /// Spin (no sleep: a sleeping thread would free its CPU for the engine) for
    /// `slowdown` times the call's own duration; returns when it ends.
    fn slow_down(&self, began: Option<Instant>, done: Instant) -> Instant {
        let Some(began) = began else {
            return done;
        };
        let until = done + (done - began).mul_f64(self.slowdown);
        let mut now = self.ctx.now();
        while now < until && !self.stopped() {
            std::hint::spin_loop();
            now = self.ctx.now();
        }
        now
    }

    /// The step stopped (a fatal error, a signal) or its profiler's window closed it.
    pub fn stopped(&self) -> bool {
        self.ctx.stop.load(Relaxed) || self.ctx.window.as_ref().is_some_and(Window::ended_the_step)
    }

    /// Wait until an operation intended at `intended` under `pacing` may start: in own
    /// time, or for a paced writer under a window with q_per_s, on the window's clock
    /// (which Q calls advance). False when the step stops first.
    pub fn wait_for_turn(&self, pacing: &Pacing, intended: Instant) -> bool {
        let window = self.ctx.window.as_ref();
        let clock = match pacing {
            Pacing::Rate { .. } => window.and_then(|w| w.clock(self.start).map(|_| w)),
            Pacing::ClosedLoop => None,
        };
        let Some(w) = clock else {
            return sleep_until(intended, &self.ctx.stop, &self.ctx.clock);
        };
        while !self.stopped() {
            if w.clock(self.start).is_some_and(|now| now >= intended) {
                return true;
            }
            std::thread::sleep(CLOCK_POLL);
        }
        false
    }

    /// Paced operations follow the window's clock rather than wall time.
    pub fn paced_by_window(&self) -> bool {
        let window = self.ctx.window.as_ref();
        window.is_some_and(|w| w.spec.q_per_s > 0.0)
    }

    pub fn finish(mut self) -> Histograms {
        if !self.measuring {
            // No operation of this thread ended after the warm-up: all of it was warm-up.
            self.rec.rebase();
        }
        self.rec.into_histograms()
    }
}
