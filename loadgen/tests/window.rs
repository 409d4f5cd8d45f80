//! The profiler's window (spec `window`) through the built binary with the null driver:
//! the edges come at the counted Q calls and wait for the caller, a timed step ends at
//! the close, a fixed-work step does all its work, and paced writers follow the
//! window's clock when asked to.

mod common;

use common::{run, spec_schema, workload, Session};
use serde_json::{json, Value};
use std::time::Duration;

fn spec(step: &str, insert: Value, window: Value, clients: u32) -> Value {
    let s = json!({"spec_version": 3, "engine": {"driver": "null", "latency_us": 100},
                   "workload": workload("insert", step, insert), "clients": clients, "seed": 5,
                   "report_interval_ms": 100, "handshake": true,
                   "wait_before_close": true, "warmup_s": 5.0, "window": window});
    assert!(
        spec_schema().is_valid(&s),
        "test spec {s} breaks the schema"
    );
    s
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// go, then answer both edges; returns (open, close, summary).
fn through(s: &mut Session) -> (Value, Value, Value) {
    s.until("ready");
    s.say("go");
    let open = s.until("window");
    assert_eq!(open["edge"], "open");
    assert!(
        s.quiet_for(Duration::from_millis(300)),
        "nothing runs until the caller answers"
    );
    s.say("open");
    let close = s.until("window");
    assert_eq!(close["edge"], "close");
    assert!(s.quiet_for(Duration::from_millis(300)), "held at the close");
    s.say("close");
    s.until("stopped");
    s.say("check");
    let summary = s.until("summary");
    assert_eq!(s.finish(), 0);
    (open, close, summary)
}

#[test]
fn a_timed_step_ends_at_the_close_whatever_its_duration() {
    let insert = json!({"duration_s": 600, "insert_rate": 0});
    let window = json!({"skip_ops": 30, "ops": 50});
    let mut s = Session::start(&spec("qr", insert, window, 2), "timed");
    let (open, close, summary) = through(&mut s);
    assert_eq!((u(&open["ops"]), u(&close["ops"])), (0, 50));
    // Two clients: the window counts over both; the step ends at the close.
    assert_eq!(u(&summary["ops"]["range_query"]["ops"]), 80);
    assert_eq!(
        summary["phases"]["warmup"]["wall_s"], 0.0,
        "skip_ops is the warm-up"
    );
}

#[test]
fn a_fixed_work_step_does_all_its_work_around_the_window() {
    let window = json!({"skip_ops": 2, "ops": 3});
    let mut s = Session::start(&spec("l.i0", json!({"rows": 1000}), window, 1), "fixed");
    let (_, close, summary) = through(&mut s);
    assert_eq!((u(&close["ops"]), u(&close["rows"])), (3, 300));
    assert_eq!(u(&summary["ops"]["insert"]["rows"]), 1000);
    assert_eq!(u(&summary["checks"]["rows_found"]), 1000);
}

#[test]
fn a_window_longer_than_the_step_closes_at_its_end() {
    let window = json!({"skip_ops": 0, "ops": 1000});
    let mut s = Session::start(&spec("l.i0", json!({"rows": 250}), window, 1), "short");
    let (_, close, _) = through(&mut s);
    assert_eq!((u(&close["ops"]), u(&close["rows"])), (3, 250));
}

#[test]
fn paced_writers_follow_the_window_clock() {
    // 100 rows/s in batches of 10 at 50 queries/s: one insert and one delete batch per
    // five queries, however fast the queries run; the query thread runs them between
    // its queries, so the count is exact, run after run.
    let insert = json!({"duration_s": 600, "insert_rate": 100, "rows_per_commit": 10});
    let window = json!({"skip_ops": 0, "ops": 400, "q_per_s": 50});
    let mut seen = vec![];
    for run in 0..2 {
        let mut s = Session::start(&spec("qp", insert.clone(), window.clone(), 1), "clock");
        let (_, _, summary) = through(&mut s);
        let queries = u(&summary["ops"]["point_query"]["ops"]);
        let inserts = u(&summary["ops"]["insert"]["ops"]);
        let deletes = u(&summary["ops"]["delete"]["ops"]);
        assert_eq!(queries, 400);
        // due at 0, 0.1 s, ... 8.0 s of the clock: the last before the call that the
        // window's close stops
        assert_eq!(
            (inserts, deletes),
            (81, 81),
            "run {run}: for {queries} queries"
        );
        assert_eq!(
            summary["checks"]["point_rows_found"],
            summary["checks"]["point_rows_expected"]
        );
        seen.push((inserts, deletes));
    }
    assert_eq!(seen[0], seen[1]);
}

#[test]
fn a_window_needs_the_handshake() {
    let mut s = spec(
        "qr",
        json!({"duration_s": 1, "insert_rate": 0}),
        json!({"ops": 5}),
        1,
    );
    s["handshake"] = json!(false);
    s["wait_before_close"] = json!(false);
    let r = run(&s);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("window needs the handshake"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_kv_readers_window_runs_the_writers_puts_between_its_reads() {
    // 116-byte entries (16 + 100) at 0.0011064 MiB/s: 10 puts/s; at 50 reads/s on the
    // window's clock, one put per five reads, run by the reader itself: exact, every run.
    let kv = json!({"keys": 1000, "key_size": 16, "value_size": 100, "duration_s": 600,
                    "writer_mb_per_s": 10.0 * 116.0 / 1048576.0});
    let window = json!({"skip_ops": 0, "ops": 400, "q_per_s": 50});
    let mut seen = vec![];
    for _ in 0..2 {
        let s = json!({"spec_version": 3, "engine": {"driver": "null", "latency_us": 100},
                       "workload": workload("kv", "readwhilewriting", kv.clone()), "clients": 1,
                       "seed": 5, "report_interval_ms": 100, "handshake": true,
                       "wait_before_close": true, "warmup_s": 5.0, "window": window.clone()});
        assert!(
            spec_schema().is_valid(&s),
            "test spec {s} breaks the schema"
        );
        let mut session = Session::start(&s, "kvclock");
        let (_, _, summary) = through(&mut session);
        let gets = u(&summary["ops"]["get"]["ops"]);
        let puts = u(&summary["ops"]["put"]["ops"]);
        assert_eq!(gets, 400);
        assert!((79..=81).contains(&puts), "{puts} puts for {gets} gets");
        seen.push(puts);
    }
    assert_eq!(seen[0], seen[1]);
}
