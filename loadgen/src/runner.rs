//! Runs one step: one thread per client, a start gate once every client is set up, a
//! check gate once every client's timed part has ended, and one reporter (this thread,
//! reporter.rs) in between, then the summary (summary.rs). The first fatal error from
//! any thread, a panic in any client thread, or a signal, ends the step at once. What
//! the threads share is context.rs.

use crate::context::{Msg, StepContext};
use crate::control::Control;
use crate::driver;
use crate::fault::Fault;
use crate::output::{self, Event};
use crate::reporter::Reporter;
use crate::spec::StepSpec;
use crate::summary;
use crate::workload;
use anyhow::{anyhow, Result};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long settling the engine may take before the step fails.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(600);

/// The spec's settle_first: the engine's background work finished before the step.
fn settle(driver: &dyn driver::Driver, interrupted: &AtomicBool) -> Result<()> {
    if let Some(kv) = driver.kv() {
        kv.flush()
            .map_err(|e| anyhow!("settle: flush: {}", e.message))?;
        return kv
            .wait_for_compaction(interrupted)
            .map_err(|e| anyhow!("settle: wait for compaction: {}", e.message));
    }
    let mut conn = driver
        .connect()
        .map_err(|e| anyhow!("settle: connect: {}", e.message))?;
    conn.cleanup_engine(SETTLE_TIMEOUT)
        .map_err(|e| anyhow!("settle: {}", e.message))
}

/// Run the step; Ok after the summary (and, if asked, after stdin closed).
/// `launched` is when the process started, for the setup phase; `fault` is what
/// DBREGRESS_LOADGEN_FAULT asks for.
pub fn run(
    spec: StepSpec,
    interrupted: Arc<AtomicBool>,
    launched: Instant,
    fault: Option<Fault>,
) -> Result<()> {
    if let Some(f) = &fault {
        f.check_clients(spec.clients)?;
    }
    let plan = workload::plan(&spec);
    let driver = driver::open(&spec)?;
    if spec.settle_first {
        settle(driver.as_ref(), &interrupted)?;
    }
    output::emit(&Event::Start {
        event_version: output::EVENT_VERSION,
        loadgen_version: env!("CARGO_PKG_VERSION"),
        driver: driver.name(),
        step: spec.workload.step_name(),
        clients: spec.clients,
        pid: std::process::id(),
        capabilities: driver.capabilities(),
    });
    let (tx, rx) = mpsc::channel();
    let ctx = Arc::new(StepContext::new(
        spec,
        driver,
        tx,
        fault,
        (plan.q_op, plan.q_unit),
    ));
    let mut threads = Vec::new();
    for client in 1..=ctx.spec.clients {
        let ctx = ctx.clone();
        let t = std::thread::Builder::new()
            .name(format!("client{client}"))
            .spawn(
                move || match ctx.catch_panics(|| workload::run_client(&ctx, client)) {
                    Ok(outcome) => {
                        let _ = ctx.tx.send(Msg::Done(client, Box::new(outcome)));
                    }
                    Err(e) => drop(ctx.fail(e)),
                },
            )?;
        threads.push(t);
    }
    let (reported, control) = Reporter::new(&ctx, rx, &interrupted, launched).run(&plan)?;
    summary::summarize(&ctx, &plan, &reported)?;
    if ctx.spec.wait_before_close {
        // Keep every connection open until the caller closes our stdin.
        control
            .unwrap_or_else(Control::listen)
            .wait_closed(&interrupted)?;
    }
    // Close the sessions only now, so the server's backends lived until here.
    for o in reported.outcomes {
        drop(o.conns);
    }
    // Every client has finished: the last reference to an embedded engine goes here,
    // which closes it cleanly. A client thread's panic was caught and reported.
    for t in threads {
        let _ = t.join();
    }
    drop(ctx);
    Ok(())
}
