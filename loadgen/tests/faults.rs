//! Nothing lost, nothing hangs: a panic in one client thread (DBREGRESS_LOADGEN_FAULT)
//! ends an hour-long step with a fatal event and stderr naming the thread and the
//! panic, in every workload; a bad DBREGRESS_LOADGEN_FAULT is refused at start. No
//! timing is asserted: a step that waited for its end would outlive the harness's
//! 120 s watchdog and be killed, with no fatal event, which fails the test.

mod common;

use common::{run_with_fault, spec_schema, workload, Run};
use serde_json::{json, Value};
/// Every step here would run this long without the fault: far beyond the watchdog.
const DURATION_S: f64 = 3600.0;

fn spec(kind: &str, step: &str, clients: u32, params: Value) -> Value {
    let s = json!({"spec_version": 3, "engine": {"driver": "null", "latency_us": 100},
                   "workload": workload(kind, step, params), "clients": clients, "seed": 5,
                   "report_interval_ms": 100});
    assert!(
        spec_schema().is_valid(&s),
        "test spec {s} breaks the schema"
    );
    s
}

/// Run with `fault` under the harness's watchdog.
fn timed_run(spec: &Value, fault: &str) -> Run {
    run_with_fault(spec, Some(fault))
}

/// The run ended with exit status 1, a fatal event and an error on stderr naming a
/// thread of `client` and the injected panic.
fn assert_panicked(r: &Run, client: u32, after: u64, what: &str) {
    let panic = format!("injected fault: panic in client {client} after {after} ops");
    let message = r.fatal();
    let thread = format!("client thread client{client}");
    assert!(
        message.starts_with(&thread) && message.ends_with(&format!("panicked: {panic}")),
        "{what}: {message}"
    );
    // stderr says it too, but the other panicking threads' own panic reports (and
    // backtraces) may be written in the middle of that line, even mid-word: the fatal
    // event above is the exact contract; here only that stderr tells the error at all.
    for part in ["Error:", &panic] {
        assert!(
            r.stderr.contains(part),
            "{what}: no {part:?} in stderr {}",
            r.stderr
        );
    }
    assert!(
        r.events.iter().all(|e| e["type"] != "summary"),
        "{what}: a summary after a panic"
    );
}

#[test]
fn a_client_panic_ends_every_workload_at_once() {
    let d = DURATION_S;
    let cases = [
        // Roles on threads of their own: query, insert, delete.
        (
            "insert",
            "qp",
            2,
            json!({"duration_s": d, "insert_rate": 100}),
        ),
        (
            "insert",
            "qr",
            2,
            json!({"duration_s": d, "insert_rate": 0}),
        ),
        // The client thread itself, a fixed amount of work that would take long.
        (
            "insert",
            "l.i0",
            2,
            json!({"rows": 1_000_000_000, "rows_per_commit": 10}),
        ),
        (
            "micro",
            "point-query",
            3,
            json!({"tables": 2, "rows": 1000, "duration_s": d}),
        ),
        (
            "kv",
            "readwhilewriting",
            2,
            json!({"keys": 1000, "key_size": 16, "value_size": 100, "duration_s": d,
                   "writer_mb_per_s": 0.1}),
        ),
        (
            "kv",
            "readrandom",
            2,
            json!({"keys": 1000, "key_size": 16, "value_size": 100, "duration_s": d}),
        ),
    ];
    for (workload, step, clients, params) in cases {
        let s = spec(workload, step, clients, params);
        for (client, after) in [(clients, 20), (1, 0)] {
            let fault = format!("panic:client={client}:after_ops={after}");
            let r = timed_run(&s, &fault);
            assert_panicked(&r, client, after, &format!("{workload} {step} {fault}"));
        }
    }
}

#[test]
fn a_panic_in_the_warmup_ends_the_step() {
    // A warm-up: the panic lands before `measuring`.
    let mut s = spec(
        "insert",
        "qp",
        2,
        json!({"duration_s": DURATION_S, "insert_rate": 0}),
    );
    s["warmup_s"] = json!(1800.0);
    assert!(spec_schema().is_valid(&s), "{s}");
    let r = timed_run(&s, "panic:client=1:after_ops=5");
    assert_panicked(&r, 1, 5, "qp with a warm-up");
}

#[test]
fn a_fault_that_never_fires_changes_nothing() {
    let s = spec("insert", "l.i0", 2, json!({"rows": 1000}));
    for fault in ["", "panic:client=2:after_ops=1000000"] {
        let r = run_with_fault(&s, Some(fault));
        assert_eq!(r.code, 0, "{fault:?}: {}", r.stderr);
        assert_eq!(r.summary()["checks"]["rows_found"], 2000, "{fault:?}");
    }
}

#[test]
fn an_unknown_fault_is_refused_at_start() {
    let s = spec("insert", "l.i0", 2, json!({"rows": 1000}));
    for bad in [
        "panic",
        "panic:client=1",
        "panic:client=0:after_ops=1",
        "crash:client=1:after_ops=1",
    ] {
        let r = run_with_fault(&s, Some(bad));
        assert_eq!(r.events.len(), 1, "{bad}: {:?}", r.events);
        let message = r.fatal();
        assert!(
            message.contains("DBREGRESS_LOADGEN_FAULT")
                && message.contains(bad)
                && message.contains("panic:client=<i>:after_ops=<n>"),
            "{bad}: {message}"
        );
        assert!(r.stderr.contains(message), "{bad}: {}", r.stderr);
    }
    let r = run_with_fault(&s, Some("panic:client=3:after_ops=1"));
    assert_eq!(
        r.fatal(),
        "DBREGRESS_LOADGEN_FAULT names client 3, but the step has 2 client(s)"
    );
}
