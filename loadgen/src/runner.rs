//! Runs one step: one thread per client, a start gate once every client is set up, one
//! reporter (this thread) printing intervals, then the summary. The first fatal error
//! from any thread, or a signal, ends the step at once.

use crate::driver::{self, Conn, DbResult, Driver};
use crate::output::{self, ErrorLimiter, Event};
use crate::spec::StepSpec;
use crate::stats::{OpKind, Recorder, Stats};
use crate::workload::{self, ClientOutcome, StepPlan};
use anyhow::{anyhow, Result};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often the reporter looks at signals and messages while waiting.
const POLL: Duration = Duration::from_millis(50);

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

/// SIGINT or SIGTERM arrived.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

enum Msg {
    Ready,
    Done(Box<ClientOutcome>),
    Fatal(anyhow::Error),
}

/// What every thread of the step shares.
pub struct StepContext {
    pub spec: StepSpec,
    pub driver: Box<dyn Driver>,
    pub stats: Stats,
    /// Set on the first fatal error or signal; every loop checks it between operations.
    pub stop: AtomicBool,
    errors: ErrorLimiter,
    arrived: AtomicU32,
    gate: (Mutex<Option<Instant>>, Condvar),
    tx: Sender<Msg>,
}

impl StepContext {
    pub fn connect(&self) -> Result<Box<dyn Conn>> {
        self.driver.connect().map_err(|e| anyhow!(e.message))
    }

    /// Tell the reporter this client is set up, then wait for the common start.
    pub fn ready_and_wait(&self) -> Option<Instant> {
        let _ = self.tx.send(Msg::Ready);
        let (lock, cv) = &self.gate;
        let mut start = lock.lock().unwrap();
        while start.is_none() && !self.stop.load(Relaxed) {
            start = cv.wait_timeout(start, POLL).unwrap().0;
        }
        *start
    }

    /// Report a thread's fatal error at once rather than when its client finishes.
    pub fn guard<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| {
            self.stop.store(true, Relaxed);
            let _ = self.tx.send(Msg::Fatal(e));
            anyhow!("reported by another thread")
        })
    }

    /// A thread's recorder and timer; `start` is the step's common start.
    pub fn worker(&self, start: Instant) -> Worker<'_> {
        Worker {
            ctx: self,
            rec: self.stats.recorder(),
            start,
        }
    }

    /// True for exactly one caller: the last of the clients to call it.
    pub fn last_to_arrive(&self) -> bool {
        self.arrived.fetch_add(1, Relaxed) + 1 == self.spec.clients
    }

    fn t_s(&self, start: Instant) -> f64 {
        start.elapsed().as_secs_f64()
    }
}

/// One thread's view: its recorder, and the runner's timing of every driver call.
pub struct Worker<'a> {
    pub ctx: &'a StepContext,
    rec: Recorder,
    start: Instant,
}

impl Worker<'_> {
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Run one driver call intended to start at `intended`; latency counts from there.
    /// Returns the rows it reported (None after an ignorable error) and when it ended.
    pub fn call(
        &mut self,
        op: OpKind,
        intended: Instant,
        f: impl FnOnce() -> DbResult<u64>,
    ) -> Result<(Option<u64>, Instant)> {
        let result = f();
        let done = Instant::now();
        match result {
            Ok(rows) => {
                let us = done.saturating_duration_since(intended).as_micros() as u64;
                self.rec.record_ok(op, us, rows);
                Ok((Some(rows), done))
            }
            Err(e) if e.class == driver::ErrorClass::Ignorable => {
                self.rec.record_error(op);
                self.ctx
                    .errors
                    .report(self.ctx.t_s(self.start), op, &e.message);
                Ok((None, done))
            }
            Err(e) => Err(OpFailed {
                op,
                message: e.message,
            }
            .into()),
        }
    }

    pub fn stopped(&self) -> bool {
        self.ctx.stop.load(Relaxed)
    }

    pub fn finish(self) -> Vec<Option<hdrhistogram::Histogram<u64>>> {
        self.rec.into_histograms()
    }
}

/// Run the step; Ok after the summary (and, if asked, after stdin closed).
pub fn run(spec: StepSpec, interrupted: Arc<AtomicBool>) -> Result<()> {
    let plan = workload::plan(&spec);
    let driver = driver::open(&spec)?;
    output::emit(&Event::Start {
        event_version: output::EVENT_VERSION,
        loadgen_version: env!("CARGO_PKG_VERSION"),
        driver: driver.name(),
        step: spec.step.name(),
        clients: spec.clients,
        pid: std::process::id(),
        capabilities: driver.capabilities(),
    });
    let (tx, rx) = mpsc::channel();
    let ctx = Arc::new(StepContext {
        spec,
        driver,
        stats: Stats::default(),
        stop: AtomicBool::new(false),
        errors: ErrorLimiter::default(),
        arrived: AtomicU32::new(0),
        gate: (Mutex::new(None), Condvar::new()),
        tx,
    });
    let mut threads = Vec::new();
    for client in 1..=ctx.spec.clients {
        let ctx = ctx.clone();
        let t = std::thread::Builder::new()
            .name(format!("client{client}"))
            .spawn(move || {
                let r = workload::run_client(&ctx, client);
                let _ = ctx.tx.send(match r {
                    Ok(outcome) => Msg::Done(Box::new(outcome)),
                    Err(e) => Msg::Fatal(e),
                });
            })?;
        threads.push(t);
    }
    let reporter = Reporter {
        ctx: &ctx,
        rx,
        interrupted: &interrupted,
    };
    let outcomes = reporter.run(&plan)?;
    if ctx.spec.wait_before_close {
        wait_for_stdin_eof(&interrupted)?;
    }
    // Close the sessions only now, so the server's backends lived until here.
    for o in outcomes {
        drop(o.conns);
    }
    // Every client has finished: the last reference to an embedded engine goes here,
    // which closes it cleanly.
    for t in threads {
        let _ = t.join();
    }
    drop(ctx);
    Ok(())
}

struct Reporter<'a> {
    ctx: &'a StepContext,
    rx: Receiver<Msg>,
    interrupted: &'a AtomicBool,
}

impl Reporter<'_> {
    fn run(&self, plan: &StepPlan) -> Result<Vec<ClientOutcome>> {
        let clients = self.ctx.spec.clients as usize;
        let mut ready = 0;
        while ready < clients {
            if let Some(Msg::Ready) = self.next(POLL)? {
                ready += 1;
            }
        }
        let start = Instant::now();
        *self.ctx.gate.0.lock().unwrap() = Some(start);
        self.ctx.gate.1.notify_all();
        let outcomes = self.report_until_done(plan, start)?;
        let end = outcomes.iter().map(|o| o.end).max().unwrap_or(start);
        workload::summarize(self.ctx, plan, end - start, &outcomes)?;
        Ok(outcomes)
    }

    /// The next message within `wait`; a fatal message or a signal becomes the error.
    fn next(&self, wait: Duration) -> Result<Option<Msg>> {
        if self.interrupted.load(Relaxed) {
            self.ctx.stop.store(true, Relaxed);
            return Err(Interrupted.into());
        }
        match self.rx.recv_timeout(wait) {
            Ok(Msg::Fatal(e)) => Err(e),
            Ok(m) => Ok(Some(m)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(anyhow!("every client thread ended")),
        }
    }

    fn report_until_done(&self, plan: &StepPlan, start: Instant) -> Result<Vec<ClientOutcome>> {
        let interval = Duration::from_millis(self.ctx.spec.report_interval_ms);
        let mut next_tick = start + interval;
        let mut outcomes = Vec::new();
        while outcomes.len() < self.ctx.spec.clients as usize {
            let now = Instant::now();
            if now >= next_tick {
                self.emit_interval(plan, next_tick - start);
                next_tick += interval;
                continue;
            }
            if let Some(Msg::Done(o)) = self.next((next_tick - now).min(POLL))? {
                outcomes.push(*o);
            }
        }
        let end = outcomes.iter().map(|o| o.end).max().unwrap_or(start);
        self.emit_interval(plan, end.saturating_duration_since(start));
        Ok(outcomes)
    }

    fn emit_interval(&self, plan: &StepPlan, t: Duration) {
        let counts = self.ctx.stats.interval();
        let ops = plan
            .kinds
            .iter()
            .map(|&k| (k, counts[k as usize].into()))
            .collect();
        output::emit(&Event::Interval {
            t_s: t.as_secs_f64(),
            ops,
        });
    }
}

/// Keep every connection open until the caller closes our stdin.
fn wait_for_stdin_eof(interrupted: &AtomicBool) -> Result<()> {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = tx.send(());
    });
    loop {
        if interrupted.load(Relaxed) {
            return Err(Interrupted.into());
        }
        match rx.recv_timeout(POLL) {
            Err(RecvTimeoutError::Timeout) => continue,
            _ => return Ok(()),
        }
    }
}
