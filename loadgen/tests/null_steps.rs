//! Drives the built binary with the null driver through every step; every line it
//! prints must validate against schema/events.schema.json.

mod common;

use assert_cmd::Command;
use common::{run, validator, workload};
use serde_json::{json, Value};

fn spec(step: &str, engine: Value, insert: Value) -> Value {
    json!({"spec_version": 3, "engine": engine, "workload": workload("insert", step, insert),
           "clients": 2, "seed": 42, "report_interval_ms": 100})
}

fn null(latency_us: u64) -> Value {
    json!({"driver": "null", "latency_us": latency_us})
}

#[test]
fn every_step_runs_and_prints_valid_events() {
    let steps = [
        ("l.i0", json!({"rows": 1000})),
        ("l.x", json!({})),
        ("l.i1", json!({"rows": 500})),
        ("l.i2", json!({"rows": 100})),
        ("cleanup", json!({})),
        ("qr", json!({"duration_s": 0.3, "insert_rate": 100})),
        ("qp", json!({"duration_s": 0.3, "insert_rate": 100})),
        ("qp", json!({"duration_s": 0.3, "insert_rate": 0})),
    ];
    for (step, insert) in steps {
        let s = spec(step, null(200), insert);
        assert!(
            validator("step-spec.schema.json").is_valid(&s),
            "test spec {s} breaks the schema"
        );
        let r = run(&s);
        assert_eq!(r.code, 0, "{step}: {}", r.stderr);
        assert_eq!(r.events[0]["type"], "start");
        assert_eq!(r.events[0]["step"], step);
        let summary = r.summary();
        let checks = &summary["checks"];
        assert_eq!(checks["rows_expected"], checks["rows_found"], "{step}");
        let finals = r
            .events
            .iter()
            .filter(|e| e["type"] == "summary" || e["type"] == "fatal");
        assert_eq!(finals.count(), 1);
        // Intervals add up to the summary.
        let q_op = summary["q_op"].as_str().unwrap();
        let interval_ops: u64 = r
            .events
            .iter()
            .filter(|e| e["type"] == "interval")
            .map(|e| e["ops"][q_op]["ops"].as_u64().unwrap())
            .sum();
        assert_eq!(
            interval_ops,
            summary["ops"][q_op]["ops"].as_u64().unwrap(),
            "{step}"
        );
    }
}

#[test]
fn load_steps_count_what_they_insert() {
    let r = run(&spec(
        "l.i0",
        null(0),
        json!({"rows": 1234, "rows_per_commit": 100}),
    ));
    let s = r.summary();
    assert_eq!(s["q_op"], "insert");
    assert_eq!(s["q_unit"], "rows");
    assert_eq!(s["ops"]["insert"]["rows"], 2 * 1234);
    assert_eq!(s["ops"]["insert"]["ops"], 2 * 13);
    assert_eq!(s["checks"]["rows_found"], 2 * 1234);
}

#[test]
fn a_bad_spec_names_the_field() {
    for (s, field) in [
        (spec("l.i0", null(0), json!({})), "workload.rows"),
        (
            spec("qp", null(0), json!({"duration_s": 1})),
            "workload.insert_rate",
        ),
        (
            spec("l.i0", null(0), json!({"rows": 1, "speed": 2})),
            "speed",
        ),
    ] {
        let r = run(&s);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.contains(field),
            "stderr should name {field}: {}",
            r.stderr
        );
        assert_eq!(r.events.len(), 1);
        assert_eq!(r.events[0]["type"], "fatal");
        assert!(r.events[0]["message"].as_str().unwrap().contains(field));
    }
}

#[test]
fn a_paced_step_hits_its_target_rate() {
    let insert = json!({"duration_s": 2.0, "insert_rate": 500, "rows_per_commit": 10});
    let r = run(&spec("qr", null(300), insert));
    let s = r.summary();
    let elapsed = s["elapsed_s"].as_f64().unwrap();
    for kind in ["insert", "delete"] {
        let op = &s["ops"][kind];
        assert_eq!(op["target_rows_per_s"], 1000.0);
        let rate = op["rows"].as_f64().unwrap() / elapsed;
        assert!(
            (800.0..=1200.0).contains(&rate),
            "{kind} ran at {rate} rows/s, target 1000"
        );
    }
    assert!(s["ops"]["range_query"]["ops"].as_u64().unwrap() > 0);
}

#[test]
fn injected_errors_are_counted_not_fatal() {
    let engine = json!({"driver": "null", "latency_us": 100, "fail_every": 7});
    let r = run(&spec(
        "qr",
        engine,
        json!({"duration_s": 0.5, "insert_rate": 200}),
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = r.summary();
    assert!(s["ops"]["range_query"]["errors"].as_u64().unwrap() > 10);
    let error_lines = r.events.iter().filter(|e| e["type"] == "error").count();
    assert!(error_lines > 0);
    assert!(
        error_lines <= 3 * 6,
        "error lines are rate-limited, got {error_lines}"
    );
    for lockstep in [false, true] {
        let r = run(&spec(
            "l.i1",
            json!({"driver": "null", "fail_every": 3}),
            json!({"rows": 300, "lockstep": lockstep}),
        ));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let s = r.summary();
        assert_eq!(
            s["ops"]["insert"]["rows"], 600,
            "failed batches are retried"
        );
        assert_eq!(
            s["ops"]["delete"]["rows"], s["ops"]["insert"]["rows"],
            "failed deletes are retried (lockstep {lockstep})"
        );
        assert_eq!(s["checks"]["rows_expected"], s["checks"]["rows_found"]);
    }
}

#[test]
fn wait_before_close_holds_until_stdin_closes() {
    let mut s = spec("l.i0", null(0), json!({"rows": 10}));
    s["wait_before_close"] = json!(true);
    let path = std::env::temp_dir().join(format!("lg-wait-{}.json", std::process::id()));
    std::fs::write(&path, s.to_string()).unwrap();
    let out = Command::cargo_bin("dbregress-loadgen")
        .unwrap()
        .arg(&path)
        .write_stdin("")
        .timeout(std::time::Duration::from_secs(30))
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(out.status.success());
    let last = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string();
    assert!(last.contains("\"summary\""));
    // With the spec on stdin, closing stdin cannot signal the end of the wait.
    let r = run(&s);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("wait_before_close"));
}

#[test]
fn sigterm_stops_the_step_with_a_fatal_event() {
    let s = spec("qr", null(500), json!({"duration_s": 60, "insert_rate": 0}));
    let bin = assert_cmd::cargo::cargo_bin("dbregress-loadgen");
    let mut child = std::process::Command::new(bin)
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(s.to_string().as_bytes()).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let kill = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert!(kill.unwrap().success());
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "fatal");
    assert_eq!(last["message"], "interrupted");
}

#[test]
fn help_and_version() {
    let out = Command::cargo_bin("dbregress-loadgen")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .contains("Usage: dbregress-loadgen <SPEC>"));
    let out = Command::cargo_bin("dbregress-loadgen")
        .unwrap()
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("dbregress-loadgen "));
}
