//! The step spec's `workload`: one tagged enum, a variant per benchmark family, each
//! carrying its own typed spec (its steps, its fields and their defaults: insert_spec,
//! kvspec, micro_spec). spec.rs, which composes the whole spec, builds on this.

use crate::insert_spec::InsertSpec;
use crate::kvspec::KvSpec;
use crate::micro_spec::MicroSpec;
use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

/// The workload and its step; `kind` names the workload, `step` one of its steps, and
/// the other fields are that workload's own
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Workload {
    /// The Insert Benchmark (docs/lab-file.md, Steps)
    Insert(InsertSpec),
    /// db_bench-style steps (docs/lab-file.md, The kv benchmark) on an embedded key-value engine
    Kv(KvSpec),
    /// sysbench-style microbenchmarks (docs/lab-file.md, The micro benchmark) on sbtest1..N
    Micro(MicroSpec),
}

impl Workload {
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Insert(_) => "insert",
            Workload::Kv(_) => "kv",
            Workload::Micro(_) => "micro",
        }
    }

    /// The step's name, as the spec gives it and the events report it.
    pub fn step_name(&self) -> &'static str {
        match self {
            Workload::Insert(s) => s.step.name(),
            Workload::Kv(s) => s.step.name(),
            Workload::Micro(s) => s.step.name(),
        }
    }

    /// Steps that run for a duration, rather than until a fixed amount of work is done:
    /// the only ones a warm-up applies to.
    pub fn runs_for_a_duration(&self) -> bool {
        match self {
            Workload::Insert(s) => s.step.is_query(),
            Workload::Kv(s) => s.step.is_timed(),
            Workload::Micro(s) => s.step.is_timed(),
        }
    }

    /// The checks the schema alone cannot make; `clients` sizes insert's expected_rows.
    pub fn validate(&self, clients: u32) -> Result<()> {
        match self {
            Workload::Insert(s) => s.validate(clients),
            Workload::Kv(s) => s.validate(),
            Workload::Micro(s) => s.validate(),
        }
    }
}
