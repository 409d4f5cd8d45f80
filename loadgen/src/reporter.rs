//! The reporter, the main thread's part of a step: it gathers the clients at the start
//! gate, runs the handshake with the caller, prints the intervals and the phase events
//! (ready, measuring, stopped), opens the check gate and collects every client's
//! outcome for the summary. With the spec's `slices` it also ends each slice (by time,
//! or when a Q call says so), waits until no call is in flight, and waits for `run`.
//!
//! Its times are the step's own (clock.rs): intervals, the warm-up's end, t_s.

use crate::context::{Msg, StepContext};
use crate::control::{Control, Heard, Interrupted, POLL};
use crate::engine_stats::EngineSnapshot;
use crate::outcome::{ClientOutcome, StepPlan};
use crate::output::{self, Event, ProcessUsage};
use crate::timeline::{Mark, Timeline};
use crate::window::Edge;
use anyhow::{bail, Result};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// What a step's summary is made of.
pub struct Reported {
    pub outcomes: Vec<ClientOutcome>,
    pub timeline: Timeline,
    /// The engine's counters when the measured window began.
    pub engine_before: Option<EngineSnapshot>,
    /// A SQL engine's buffer counters when the timed part ended, before the checks
    /// (None: read at the summary, as an embedded engine's are).
    pub engine_after: Option<EngineSnapshot>,
}

/// The clients' messages and what they said so far.
struct Inbox<'a> {
    ctx: &'a StepContext,
    rx: Receiver<Msg>,
    interrupted: &'a AtomicBool,
    ready: usize,
    /// Per client: when its timed part ended.
    ends: Vec<Option<Instant>>,
    outcomes: Vec<ClientOutcome>,
    /// An edge of the profiler's window a client waits at.
    edge: Option<Edge>,
}

impl Inbox<'_> {
    /// Take the next message within `wait`; a fatal message or a signal is the error.
    /// True when there was one.
    fn pump(&mut self, wait: Duration) -> Result<bool> {
        if self.interrupted.load(Relaxed) {
            self.ctx.stop.store(true, Relaxed);
            return Err(Interrupted.into());
        }
        match self.rx.recv_timeout(wait) {
            Ok(Msg::Fatal(e)) => return Err(e),
            Ok(Msg::Ready) => self.ready += 1,
            Ok(Msg::Window(edge)) => self.edge = Some(edge),
            // Only a wake-up: the slices say the slice is over.
            Ok(Msg::Slice) => {}
            Ok(Msg::Timed(client, end)) => self.ends[client as usize - 1] = Some(end),
            Ok(Msg::Done(client, o)) => {
                self.ends[client as usize - 1].get_or_insert(o.end);
                self.outcomes.push(*o);
            }
            Err(RecvTimeoutError::Timeout) => return Ok(false),
            Err(RecvTimeoutError::Disconnected) => bail!("every client thread ended"),
        }
        Ok(true)
    }

    /// Take every message already sent.
    fn drain(&mut self) -> Result<()> {
        while self.pump(Duration::ZERO)? {}
        Ok(())
    }

    fn all_timed(&self) -> bool {
        self.ends.iter().all(Option::is_some)
    }
}

pub struct Reporter<'a> {
    inbox: Inbox<'a>,
    /// stdin, with the handshake.
    control: Option<Control>,
    launched: Instant,
    /// With slices: the last slice's number, and when (own time) the running one began.
    slice: (u64, Instant),
}

/// The start of the measured window.
struct Measuring {
    mark: Mark,
    engine_before: Option<EngineSnapshot>,
}

impl<'a> Reporter<'a> {
    pub fn new(
        ctx: &'a StepContext,
        rx: Receiver<Msg>,
        interrupted: &'a AtomicBool,
        launched: Instant,
    ) -> Self {
        let inbox = Inbox {
            ctx,
            rx,
            interrupted,
            ready: 0,
            ends: vec![None; ctx.spec.clients as usize],
            outcomes: Vec::new(),
            edge: None,
        };
        let control = ctx.spec.handshake.then(Control::listen);
        Reporter {
            inbox,
            control,
            launched,
            slice: (0, launched),
        }
    }

    fn ctx(&self) -> &'a StepContext {
        self.inbox.ctx
    }

    /// Run the step up to its summary; hands stdin back for wait_before_close.
    pub fn run(mut self, plan: &StepPlan) -> Result<(Reported, Option<Control>)> {
        let ready = self.gather()?;
        let (go, measuring) = self.go(plan)?;
        self.close_window(go.at)?;
        let (end, stopped) = self.stop(plan, go.at, measuring.mark.at);
        let engine_after = if self.ctx().reads_state_at_stop() {
            self.engine_snapshot()?
        } else {
            None
        };
        self.expect("check")?;
        let check = Mark::now();
        self.ctx().checks.open(());
        while self.inbox.outcomes.len() < self.inbox.ends.len() {
            self.inbox.pump(POLL)?;
        }
        let timeline = Timeline {
            launched: self.launched,
            ready,
            go,
            measuring: measuring.mark,
            end,
            stopped,
            check,
        };
        let reported = Reported {
            outcomes: self.inbox.outcomes,
            timeline,
            engine_before: measuring.engine_before,
            engine_after,
        };
        Ok((reported, self.control))
    }

    /// Wait until every client is set up, say so, and wait for `go`.
    fn gather(&mut self) -> Result<Mark> {
        while self.inbox.ready < self.inbox.ends.len() {
            self.inbox.pump(POLL)?;
        }
        let ready = Mark::now();
        if self.ctx().reads_state_at_stop() {
            // A SQL engine's first read of its buffer counters (MySQL opens the
            // connection that reads them) comes before the timed part, not inside it.
            self.engine_snapshot()?;
        }
        let pids = self.ctx().session_pids.lock();
        let mut server_pids = pids.unwrap_or_else(|e| e.into_inner()).clone();
        server_pids.sort_unstable();
        output::emit(&Event::Ready {
            process: ready.usage,
            server_pids,
        });
        self.expect("go")?;
        Ok(ready)
    }

    /// Every client's timed part has ended: the last interval, the last slice, then
    /// `stopped`. Returns the end of the last timed operation, and the mark of `stopped`.
    fn stop(&mut self, plan: &StepPlan, start: Instant, measured_from: Instant) -> (Instant, Mark) {
        let end = self.timed_end(start).max(measured_from);
        let t = end.saturating_duration_since(start);
        self.emit_interval(plan, t);
        self.last_slice(start);
        let stopped = Mark::now();
        output::emit(&Event::Stopped {
            t_s: t.as_secs_f64(),
            elapsed_s: (end - measured_from).as_secs_f64(),
            process: stopped.usage,
        });
        (end, stopped)
    }

    /// The end (own time) of the last client's timed part.
    fn timed_end(&self, start: Instant) -> Instant {
        let end = self.inbox.ends.iter().flatten().max().copied();
        end.unwrap_or(start)
    }

    /// Wait for `word` on stdin, with the handshake; stdin closing is fatal.
    fn expect(&mut self, word: &str) -> Result<()> {
        let Some(control) = &self.control else {
            return Ok(());
        };
        loop {
            self.inbox.pump(Duration::ZERO)?;
            match control.hear(POLL) {
                Heard::Line(line) if line == word => return Ok(()),
                Heard::Line(line) if line.is_empty() => {}
                Heard::Line(line) => bail!("expected `{word}` on stdin, got `{line}`"),
                Heard::Nothing => {}
                Heard::Closed => bail!("stdin closed before {word}"),
            }
        }
    }

    /// Open the start gate and report until every client's timed part has ended.
    fn go(&mut self, plan: &StepPlan) -> Result<(Mark, Measuring)> {
        let warm = !self.ctx().spec.warmup().is_zero();
        // Without a warm-up the window starts with the step: the engine's counters are
        // read just before it.
        let engine_before = if warm { None } else { self.engine_snapshot()? };
        let go = Mark::now();
        if let Some(s) = &self.ctx().slices {
            // Nothing runs and no time passes for the step until the caller says run.
            s.hold(&self.ctx().clock, go.at);
            self.emit_slice(0, (go.at, go.at), (0, 0), false);
            self.expect("run")?;
            s.resume(&self.ctx().clock);
        }
        self.ctx().start.open(go.at);
        let measuring = (!warm).then(|| {
            output::emit(&Event::Measuring {
                t_s: 0.0,
                process: go.usage,
            });
            Measuring {
                mark: go,
                engine_before,
            }
        });
        let measuring = self.report_until_timed(plan, go.at, measuring)?;
        Ok((go, measuring))
    }

    /// Print intervals, and `measuring` when the warm-up ends, until every client's
    /// timed part has ended; returns the start of the measured window.
    fn report_until_timed(
        &mut self,
        plan: &StepPlan,
        start: Instant,
        mut measuring: Option<Measuring>,
    ) -> Result<Measuring> {
        let measure_at = start + self.ctx().spec.warmup();
        let interval = Duration::from_millis(self.ctx().spec.report_interval_ms);
        let mut next_tick = start + interval;
        while !self.inbox.all_timed() {
            if let Some(edge) = self.inbox.edge.take() {
                self.window_edge(edge, start)?;
                continue;
            }
            let now = self.ctx().now();
            if self.slice_over(now) {
                self.end_slice(start)?;
                continue;
            }
            // An interval ending at the boundary is the warm-up's: it goes first.
            if now >= next_tick {
                self.emit_interval(plan, next_tick - start);
                next_tick += interval;
                continue;
            }
            if measuring.is_none() && now >= measure_at {
                measuring = Some(self.begin_measuring(start, measure_at)?);
                continue;
            }
            let mut wake = match measuring {
                None => next_tick.min(measure_at),
                Some(_) => next_tick,
            };
            if let Some(end) = self.slice_deadline() {
                wake = wake.min(end);
            }
            self.inbox
                .pump(wake.saturating_duration_since(now).min(POLL))?;
        }
        match measuring {
            Some(m) => Ok(m),
            // Every client stopped within the warm-up (a failure is on its way).
            None => self.begin_measuring(start, self.ctx().now().min(measure_at)),
        }
    }

    /// When (own time) the running slice ends, when slices are timed.
    fn slice_deadline(&self) -> Option<Instant> {
        let s = self.ctx().slices.as_ref()?;
        s.spec.length().map(|len| self.slice.1 + len)
    }

    /// Is the running slice over: its time is up, or its Q calls began?
    fn slice_over(&self, now: Instant) -> bool {
        let Some(s) = self.ctx().slices.as_ref() else {
            return false;
        };
        s.pausing() || self.slice_deadline().is_some_and(|end| now >= end)
    }

    /// End the running slice: no call starts; once none is in flight the step's clock
    /// stands still, the slice is reported, and the next begins when the caller says run.
    fn end_slice(&mut self, start: Instant) -> Result<()> {
        let ctx = self.ctx();
        let Some(s) = ctx.slices.as_ref() else {
            return Ok(());
        };
        s.end_slice();
        s.settle(&ctx.clock);
        while !s.wait_settled(POLL) {
            self.inbox.pump(Duration::ZERO)?;
        }
        // A fatal error that stopped the calls goes first.
        self.inbox.drain()?;
        if ctx.stop.load(Relaxed) {
            bail!("stopped between slices");
        }
        if self.inbox.all_timed() {
            // The timed work ended with the slice: it is the last, reported before
            // `stopped` (last_slice), and nothing waits for `run`.
            s.resume(&ctx.clock);
            return Ok(());
        }
        let end = ctx.now();
        self.emit_slice(self.slice.0 + 1, (start, end), s.take_q(), false);
        self.expect("run")?;
        s.resume(&ctx.clock);
        Ok(())
    }

    /// Every client's timed part has ended: the last slice's figures, then no more
    /// slices (nothing waits at their gate).
    fn last_slice(&mut self, start: Instant) {
        let Some(s) = self.ctx().slices.as_ref() else {
            return;
        };
        s.finish(&self.ctx().clock);
        let end = self.timed_end(start).max(self.slice.1);
        self.emit_slice(self.slice.0 + 1, (start, end), s.take_q(), true);
    }

    /// Print slice n's event (0 before the first): it ended at `end` (own time); the
    /// step started at `start`. The next slice begins at `end`.
    fn emit_slice(&mut self, n: u64, (start, end): (Instant, Instant), q: (u64, u64), last: bool) {
        let began = if n == 0 { start } else { self.slice.1 };
        let (q, q_all) = q;
        output::emit(&Event::Slice {
            n,
            t_s: end.saturating_duration_since(start).as_secs_f64(),
            slice_s: end.saturating_duration_since(began).as_secs_f64(),
            q,
            q_all,
            last,
            process: ProcessUsage::now(),
        });
        self.slice = (n, end);
    }

    /// Announce an edge of the profiler's window, wait for the caller's answer, and let
    /// the Q calls go on.
    fn window_edge(&mut self, edge: Edge, start: Instant) -> Result<()> {
        let Some(w) = self.ctx().window.as_ref() else {
            bail!("a client reached the edge of a window the spec has not");
        };
        let (ops, rows) = w.counted();
        let t_s = self.ctx().t_s(start);
        // The engine's counters, read while the Q calls wait at the edge. Outside the
        // edges (before the open is announced: the caller zeroes its profiler after;
        // after the close is answered: it has read its profiler), so a statement that
        // reads them is not counted; or, for counters a kernel file holds (a SQL
        // engine's backends' reads), inside them, so what the caller's profiler does in
        // the server at an edge is not in the window's counters.
        let inside = self.ctx().counters_read_inside();
        let read_now = |at: Edge, inner: bool| edge == at && inner == inside;
        if read_now(Edge::Open, false) {
            w.engine_at_open(self.engine_snapshot()?, t_s);
        }
        if read_now(Edge::Close, true) {
            w.engine_at_close(self.engine_snapshot()?, t_s);
        }
        output::emit(&Event::Window {
            edge: edge.word(),
            t_s,
            ops,
            rows,
        });
        self.expect(edge.word())?;
        if read_now(Edge::Open, true) {
            w.engine_at_open(self.engine_snapshot()?, t_s);
        }
        if read_now(Edge::Close, false) {
            w.engine_at_close(self.engine_snapshot()?, t_s);
        }
        w.answered(edge);
        Ok(())
    }

    /// Every client's timed part has ended: a window still open (the step ran fewer Q
    /// calls than skip_ops + ops) closes here.
    fn close_window(&mut self, start: Instant) -> Result<()> {
        match self.ctx().window.as_ref() {
            Some(w) if w.was_opened() && !w.over.load(std::sync::atomic::Ordering::SeqCst) => {
                self.window_edge(Edge::Close, start)
            }
            _ => Ok(()),
        }
    }

    fn begin_measuring(&self, start: Instant, at: Instant) -> Result<Measuring> {
        let engine_before = self.engine_snapshot()?;
        let mark = Mark::now().at(at);
        output::emit(&Event::Measuring {
            t_s: (at - start).as_secs_f64(),
            process: mark.usage,
        });
        Ok(Measuring {
            mark,
            engine_before,
        })
    }

    fn engine_snapshot(&self) -> Result<Option<EngineSnapshot>> {
        self.ctx().engine_snapshot()
    }

    fn emit_interval(&self, plan: &StepPlan, t: Duration) {
        let counts = self.ctx().stats.interval();
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
