//! A client's roles, each on its own scoped thread with its own recorder: what every
//! workload family that runs more than one thread per client uses.

use crate::context::{StepContext, Worker};
use crate::outcome::Histograms;
use anyhow::{anyhow, Result};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Instant;

/// Run a role (client, name) on its own scoped thread, `client<n>-<name>`, with its own
/// recorder; a fatal error or a panic is reported to the runner at once.
pub fn spawn_role<'scope, 'env, T: Send + 'scope>(
    s: &'scope Scope<'scope, 'env>,
    ctx: &'env StepContext,
    (client, role): (u32, &str),
    start: Instant,
    f: impl FnOnce(&mut Worker<'env>) -> Result<T> + Send + 'scope,
) -> Result<ScopedJoinHandle<'scope, Result<(T, Histograms)>>> {
    let name = format!("client{client}-{role}");
    let h = std::thread::Builder::new()
        .name(name.clone())
        .spawn_scoped(s, move || {
            ctx.catch_panics(|| {
                let mut w = ctx.worker(client, start);
                let r = ctx.guard(f(&mut w))?;
                Ok((r, w.finish()))
            })
        });
    // Stop the roles already started, or the scope would wait for them to end.
    ctx.guard(h.map_err(|e| anyhow!("cannot start thread {name}: {e}")))
}

pub fn join<T>(h: ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    h.join().map_err(|_| anyhow!("a worker thread panicked"))?
}
