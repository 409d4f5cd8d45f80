//! The reporter, the main thread's part of a step: it gathers the clients at the start
//! gate, runs the handshake with the caller, prints the intervals and the phase events
//! (ready, measuring, stopped), opens the check gate and collects every client's
//! outcome for the summary.

use crate::context::{Msg, StepContext};
use crate::control::{Control, Heard, Interrupted, POLL};
use crate::driver::kv::EngineSnapshot;
use crate::outcome::{ClientOutcome, StepPlan};
use crate::output::{self, Event};
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
    /// An embedded engine's counters when the measured window began (kv only).
    pub engine_before: Option<EngineSnapshot>,
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
    fn pump(&mut self, wait: Duration) -> Result<()> {
        if self.interrupted.load(Relaxed) {
            self.ctx.stop.store(true, Relaxed);
            return Err(Interrupted.into());
        }
        match self.rx.recv_timeout(wait) {
            Ok(Msg::Fatal(e)) => return Err(e),
            Ok(Msg::Ready) => self.ready += 1,
            Ok(Msg::Window(edge)) => self.edge = Some(edge),
            Ok(Msg::Timed(client, end)) => self.ends[client as usize - 1] = Some(end),
            Ok(Msg::Done(client, o)) => {
                self.ends[client as usize - 1].get_or_insert(o.end);
                self.outcomes.push(*o);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => bail!("every client thread ended"),
        }
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
        };
        Ok((reported, self.control))
    }

    /// Wait until every client is set up, say so, and wait for `go`.
    fn gather(&mut self) -> Result<Mark> {
        while self.inbox.ready < self.inbox.ends.len() {
            self.inbox.pump(POLL)?;
        }
        let ready = Mark::now();
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

    /// Every client's timed part has ended: the last interval, then `stopped`.
    /// Returns the end of the last timed operation, and the mark of `stopped`.
    fn stop(&self, plan: &StepPlan, start: Instant, measured_from: Instant) -> (Instant, Mark) {
        let end = self.inbox.ends.iter().flatten().max().copied();
        let end = end.unwrap_or(start).max(measured_from);
        let t = end.saturating_duration_since(start);
        self.emit_interval(plan, t);
        let stopped = Mark::now();
        output::emit(&Event::Stopped {
            t_s: t.as_secs_f64(),
            elapsed_s: (end - measured_from).as_secs_f64(),
            process: stopped.usage,
        });
        (end, stopped)
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
            let now = Instant::now();
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
            let wake = match measuring {
                None => next_tick.min(measure_at),
                Some(_) => next_tick,
            };
            self.inbox.pump((wake - now).min(POLL))?;
        }
        match measuring {
            Some(m) => Ok(m),
            // Every client stopped within the warm-up (a failure is on its way).
            None => self.begin_measuring(start, Instant::now().min(measure_at)),
        }
    }

    /// Announce an edge of the profiler's window, wait for the caller's answer, and let
    /// the Q calls go on.
    fn window_edge(&mut self, edge: Edge, start: Instant) -> Result<()> {
        let Some(w) = self.ctx().window.as_ref() else {
            bail!("a client reached the edge of a window the spec has not");
        };
        let (ops, rows) = w.counted();
        output::emit(&Event::Window {
            edge: edge.word(),
            t_s: start.elapsed().as_secs_f64(),
            ops,
            rows,
        });
        self.expect(edge.word())?;
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
