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
use std::thread::JoinHandle;
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

/// Where a parked client thread receives the step's context.
type Handoff = mpsc::Sender<Arc<StepContext>>;

/// One thread per client, each waiting for the step's context on its channel, then
/// running the client's workload; a thread whose channel closes unused (the engine
/// could not be opened) ends without a word.
///
/// Why before the engine: RocksDB seeds the random heights of its memtable's skiplist
/// from a hash of the inserting thread's id (Random::GetTLSInstance, seeded with
/// std::hash<std::thread::id>), and a thread's id (its pthread_t) is an address at the
/// top of its stack. Spawned after the engine was opened and settled, a client's stack
/// lay 64 MiB lower for each glibc malloc arena (a 64 MiB heap) that RocksDB's
/// background threads had happened to create by then: under callgrind, replays of one
/// build drew one of a few skiplists (RocksDB 10.2's overwritesome counted 17,556,
/// 17,830 or 17,886 instructions per put, the difference all in key comparisons), and
/// builds whose background threads allocate differently would draw different ones.
/// Spawned here, every replay and every build of a library draw the same skiplist.
fn spawn_clients(clients: u32) -> Result<(Vec<JoinHandle<()>>, Vec<Handoff>)> {
    let mut threads = Vec::new();
    let mut contexts = Vec::new();
    for client in 1..=clients {
        let (handoff, parked) = mpsc::channel::<Arc<StepContext>>();
        let t = std::thread::Builder::new()
            .name(format!("client{client}"))
            .spawn(move || {
                let Ok(ctx) = parked.recv() else {
                    return;
                };
                match ctx.catch_panics(|| workload::run_client(&ctx, client)) {
                    Ok(outcome) => {
                        let _ = ctx.tx.send(Msg::Done(client, Box::new(outcome)));
                    }
                    Err(e) => drop(ctx.fail(e)),
                }
            })?;
        threads.push(t);
        contexts.push(handoff);
    }
    Ok((threads, contexts))
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
    // The client threads start first, parked until the step's context exists: before
    // the engine is opened (an embedded one loaded), settled, or has started threads
    // of its own. Each client thread's place in memory, and so its identity, then
    // depends on this program alone, not on the engine's build or on what its
    // background threads did before (spawn_clients).
    let (parked, contexts) = spawn_clients(spec.clients)?;
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
    for handoff in contexts {
        let _ = handoff.send(ctx.clone());
    }
    let threads = parked;
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
