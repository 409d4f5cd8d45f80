//! Workloads speak only to the driver traits, one module per benchmark family: insert
//! (the Insert Benchmark), micro (the microbenchmarks), kv (db_bench-style steps). A
//! workload plans a step (which op kinds, which is the step's Q) and runs one client in
//! the step's context (context.rs); the runner reports and summarizes.

mod insert;
mod insert_loops;
mod kv;
mod kv_data;
mod kv_loops;
mod live_ids;
mod micro;
mod micro_gen;
mod micro_ops;
mod roles;
mod rows;

use crate::context::StepContext;
use crate::outcome::{ClientOutcome, StepPlan};
use crate::spec::StepSpec;
use crate::step::Workload;
use anyhow::Result;

/// Run client `client` (1-based) of the spec's workload.
pub fn run_client(ctx: &StepContext, client: u32) -> Result<ClientOutcome> {
    match ctx.spec.workload {
        Workload::Insert => insert::run_client(ctx, client),
        Workload::Micro => micro::run_client(ctx, client),
        Workload::Kv => kv::run_client(ctx, client),
    }
}

pub fn plan(spec: &StepSpec) -> StepPlan {
    match spec.workload {
        Workload::Insert => insert::plan(spec),
        Workload::Kv => kv::plan(spec),
        Workload::Micro => micro::plan(spec),
    }
}
