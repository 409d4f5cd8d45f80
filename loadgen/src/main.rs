//! dbregress-loadgen: drives one step of a workload against one running engine and
//! prints what happened as JSON lines (schema/events.schema.json).

mod clock;
mod context;
mod control;
mod driver;
mod engine_stats;
mod fault;
mod gate;
mod insert_spec;
mod kvspec;
mod micro_spec;
mod outcome;
mod output;
mod pace;
mod reporter;
mod runner;
mod slice_spec;
mod slices;
mod spec;
mod stats;
mod summary;
mod timeline;
mod window;
mod workload;
mod workload_spec;

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

const USAGE: &str = "\
Usage: dbregress-loadgen <SPEC>
       dbregress-loadgen --print-spec-schema

Runs one step described by a step spec (schema/step-spec.schema.json) and prints the
event stream (schema/events.schema.json) on stdout, one JSON object per line.

Arguments:
  <SPEC>  path of the step spec JSON file, or - to read it from stdin
          (with handshake or wait_before_close, give a file: stdin is then the
          caller's: the lines go, run (slices) and check, and its end)

Options:
  -h, --help               print this help
  -V, --version            print the version
      --print-spec-schema  print the step spec's JSON Schema, generated from the types
                           the loadgen reads (make schema writes it to
                           schema/step-spec.schema.json)

Environment:
  DBREGRESS_LOADGEN_FAULT  for tests: panic:client=<i>:after_ops=<n> makes client i
                           panic once it has completed n timed operations";

fn main() {
    if let Err(e) = run() {
        let op = e.downcast_ref::<context::OpFailed>().map(|f| f.op);
        output::fatal(&format!("{e:#}"), op);
        eprintln!("Error: {e:#}");
        let interrupted = e.downcast_ref::<control::Interrupted>().is_some();
        let _ = std::io::Write::flush(&mut std::io::stdout());
        // _exit, not exit: client threads may still be inside an embedded engine, whose
        // C++ static destructors exit() would run under them (a crash, seen with RocksDB).
        // Every event was written and flushed already.
        unsafe { libc::_exit(if interrupted { 130 } else { 1 }) };
    }
}

fn run() -> Result<()> {
    let launched = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = match args.as_slice() {
        [a] if a == "-h" || a == "--help" => {
            println!("{USAGE}");
            return Ok(());
        }
        [a] if a == "-V" || a == "--version" => {
            println!("dbregress-loadgen {}", env!("CARGO_PKG_VERSION"));
            return Ok(());
        }
        [a] if a == "--print-spec-schema" => {
            println!("{}", serde_json::to_string_pretty(&spec::schema())?);
            return Ok(());
        }
        [path] => path.clone(),
        _ => bail!("expected exactly one argument, the step spec path or -\n\n{USAGE}"),
    };
    // Read once, here: workers only look at what it parsed to.
    let fault = fault::Fault::from_env()?;
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal ends the process at once, should the step not stop.
        signal_hook::flag::register_conditional_shutdown(sig, 130, interrupted.clone())?;
        signal_hook::flag::register(sig, interrupted.clone())?;
    }
    let text = if path == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the step spec from stdin")?;
        text
    } else {
        std::fs::read_to_string(&path).with_context(|| format!("cannot read step spec {path}"))?
    };
    let spec = spec::StepSpec::from_json(&text)?;
    if spec.wait_before_close && path == "-" {
        bail!("invalid step spec: wait_before_close needs the spec in a file, since closing stdin ends the wait");
    }
    if spec.handshake && path == "-" {
        bail!("invalid step spec: handshake needs the spec in a file, since go and check come on stdin");
    }
    runner::run(spec, interrupted, launched, fault)
}
