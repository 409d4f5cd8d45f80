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
use crate::workload_spec::Workload;
use anyhow::Result;

/// Run client `client` (1-based) of the spec's workload.
pub fn run_client(ctx: &StepContext, client: u32) -> Result<ClientOutcome> {
    match &ctx.spec.workload {
        Workload::Insert(w) => insert::run_client(ctx, w, client),
        Workload::Micro(w) => micro::run_client(ctx, w, client),
        Workload::Kv(w) => kv::run_client(ctx, w, client),
    }
}

pub fn plan(spec: &StepSpec) -> StepPlan {
    match &spec.workload {
        Workload::Insert(w) => insert::plan(spec, w),
        Workload::Kv(w) => kv::plan(w),
        Workload::Micro(w) => micro::plan(w),
    }
}
