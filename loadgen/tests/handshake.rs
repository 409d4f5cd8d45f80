//! The step's phases through the built binary with the null driver: the stdin
//! handshake (ready, go, measuring, stopped, check, summary), the warm-up left out of
//! the summary, and the injected slowdown. Bounds are loose: these machines are noisy.

mod common;

use common::{run, spec_schema, workload, Session};
use serde_json::{json, Value};
use std::time::Duration;

fn spec(step: &str, insert: Value, extra: Value) -> Value {
    let mut s = json!({"spec_version": 3, "engine": {"driver": "null", "latency_us": 200},
                       "workload": workload("insert", step, insert), "clients": 2, "seed": 5,
                       "report_interval_ms": 100});
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    assert!(
        spec_schema().is_valid(&s),
        "test spec {s} breaks the schema"
    );
    s
}

fn handshake(warmup_s: f64) -> Value {
    json!({"handshake": true, "wait_before_close": true, "warmup_s": warmup_s})
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn types(events: &[Value]) -> Vec<&str> {
    let mut t: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    t.dedup();
    t
}

#[test]
fn the_handshake_orders_the_phases_and_the_warmup_is_left_out() {
    let insert = json!({"duration_s": 0.5, "insert_rate": 0});
    let mut s = Session::start(&spec("qr", insert, handshake(0.4)), "phases");
    s.until("ready");
    assert!(s.quiet_for(Duration::from_millis(300)), "nothing before go");
    s.say("go");
    let measuring = s.until("measuring");
    assert!((0.39..0.5).contains(&f(&measuring["t_s"])), "{measuring}");
    let stopped = s.until("stopped");
    assert!(
        s.quiet_for(Duration::from_millis(300)),
        "no checks before check"
    );
    s.say("check");
    let summary = s.until("summary");
    assert!(
        s.quiet_for(Duration::from_millis(200)),
        "held until stdin closes"
    );
    assert_eq!(s.finish(), 0);
    let order = types(&s.events);
    let want = [
        "start",
        "ready",
        "interval",
        "measuring",
        "interval",
        "stopped",
        "summary",
    ];
    assert_eq!(order, want);
    let elapsed = f(&summary["elapsed_s"]);
    assert_eq!(elapsed, f(&stopped["elapsed_s"]));
    assert!((0.45..1.0).contains(&elapsed), "elapsed {elapsed}");
    assert!(f(&stopped["t_s"]) > 0.85, "warm-up + duration: {stopped}");
    let p = &summary["phases"];
    assert!((0.39..0.5).contains(&f(&p["warmup"]["wall_s"])), "{p}");
    assert_eq!(f(&p["measured"]["wall_s"]), elapsed);
    assert!(f(&p["setup"]["wall_s"]) < 5.0, "{p}");
    // The intervals cover the warm-up, the summary only the measured window.
    let ops = summary["ops"]["range_query"]["ops"].as_u64().unwrap();
    let all: u64 = s
        .events
        .iter()
        .filter(|e| e["type"] == "interval")
        .map(|e| e["ops"]["range_query"]["ops"].as_u64().unwrap())
        .sum();
    assert!(
        ops > 0 && all > ops + ops / 4,
        "summary {ops}, intervals {all}"
    );
    assert!(summary["ops"]["range_query"]["latency_us"]["max"].as_u64() > Some(0));
}

#[test]
fn fixed_work_steps_ignore_the_warmup() {
    let mut s = Session::start(
        &spec("l.i0", json!({"rows": 300}), handshake(30.0)),
        "fixed",
    );
    s.until("ready");
    s.say("go");
    assert_eq!(f(&s.until("measuring")["t_s"]), 0.0);
    s.until("stopped");
    s.say("check");
    let summary = s.until("summary");
    assert_eq!(s.finish(), 0);
    assert_eq!(
        summary["ops"]["insert"]["rows"], 600,
        "every row is measured"
    );
    assert_eq!(summary["checks"]["rows_found"], 600);
    assert_eq!(f(&summary["phases"]["warmup"]["wall_s"]), 0.0);
}

#[test]
fn stdin_closing_early_is_fatal() {
    for (before, last_seen) in [("go", "ready"), ("check", "stopped")] {
        let insert = json!({"duration_s": 0.2, "insert_rate": 0});
        let mut s = Session::start(&spec("qp", insert, handshake(0.0)), before);
        s.until("ready");
        if before == "check" {
            s.say("go");
            s.until(last_seen);
        }
        assert_eq!(s.finish(), 1);
        let last = s.events.last().unwrap();
        assert_eq!(last["type"], "fatal", "{last}");
        assert_eq!(last["message"], format!("stdin closed before {before}"));
    }
}

#[test]
fn a_wrong_line_is_named() {
    let insert = json!({"duration_s": 0.2, "insert_rate": 0});
    let mut s = Session::start(&spec("qp", insert, handshake(0.0)), "wrong");
    s.until("ready");
    s.say("start");
    let fatal = s.until("fatal");
    assert_eq!(fatal["message"], "expected `go` on stdin, got `start`");
    assert_eq!(s.finish(), 1);
}

#[test]
fn a_handshake_needs_the_spec_in_a_file() {
    let r = run(&spec("l.x", json!({}), json!({"handshake": true})));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("handshake needs the spec in a file"),
        "{}",
        r.stderr
    );
}

/// Q of one step with and without a slowdown of 1.0 (the busy-wait as long as the
/// call): each workload's timed calls go through the runner, so Q about halves.
fn slowdown_ratio(base: Value) -> (f64, Value, Value) {
    let q = |slowdown: f64| {
        let mut s = base.clone();
        s["inject_slowdown"] = json!(slowdown);
        let r = run(&s);
        let sum = r.summary().clone();
        let q_op = sum["q_op"].as_str().unwrap();
        (f(&sum["ops"][q_op]["ops"]) / f(&sum["elapsed_s"]), sum)
    };
    let (plain, plain_sum) = q(0.0);
    let (slow, slow_sum) = q(1.0);
    (slow / plain, plain_sum, slow_sum)
}

#[test]
fn an_injected_slowdown_lowers_q() {
    let engine = json!({"driver": "null", "latency_us": 300});
    let specs = [
        json!({"spec_version": 3, "engine": engine, "clients": 1, "seed": 1,
               "workload": workload("insert", "qp", json!({"duration_s": 0.6, "insert_rate": 0}))}),
        json!({"spec_version": 3, "engine": engine, "clients": 1, "seed": 1,
               "workload": workload("kv", "fillseq", json!({"keys": 1500}))}),
        json!({"spec_version": 3, "engine": engine, "clients": 1, "seed": 1,
               "workload": workload("micro", "point-query", json!({"rows": 100, "duration_s": 0.6}))}),
    ];
    for s in specs {
        let (ratio, plain, slow) = slowdown_ratio(s.clone());
        // One-sided: a 100% slowdown halves Q on an idle machine; contention from other
        // work can only lower the ratio further (the busy-wait scales the measured call).
        assert!(ratio < 0.8, "{}: Q ratio {ratio}", s["workload"]["step"]);
        // The busy-wait is not latency.
        let q_op = plain["q_op"].as_str().unwrap();
        let p50 = |sum: &Value| f(&sum["ops"][q_op]["latency_us"]["p50"]);
        assert!(
            p50(&slow) < 1.6 * p50(&plain),
            "{}: {slow}",
            s["workload"]["step"]
        );
    }
}

#[test]
fn a_signal_while_waiting_for_go_ends_the_step() {
    let insert = json!({"duration_s": 0.2, "insert_rate": 0});
    let mut s = Session::start(&spec("qp", insert, handshake(0.0)), "signal");
    s.until("ready");
    let pid = s.pid().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(kill.unwrap().success());
    assert_eq!(s.until("fatal")["message"], "interrupted");
    assert_eq!(s.finish(), 130);
}
