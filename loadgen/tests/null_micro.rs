//! Drives the built binary with the null driver through every microbenchmark step;
//! every spec must validate against schema/step-spec.schema.json and every line the
//! loadgen prints against schema/events.schema.json.

use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::OnceLock;

const STEPS: [&str; 29] = [
    "load",
    "point-query",
    "random-points",
    "hot-points",
    "points-covered-pk",
    "points-notcovered-pk",
    "points-covered-si",
    "points-notcovered-si",
    "range-covered-pk",
    "range-notcovered-pk",
    "range-covered-si",
    "range-notcovered-si",
    "read-only",
    "read-only-simple",
    "read-only-sum",
    "read-only-order",
    "read-only-distinct",
    "read-only-count",
    "scan",
    "update-inlist",
    "update-index",
    "update-nonindex",
    "update-one",
    "update-zipf",
    "write-only",
    "read-write",
    "cleanup",
    "delete",
    "insert",
];

fn validator(name: &str) -> &'static jsonschema::Validator {
    static V: OnceLock<[jsonschema::Validator; 2]> = OnceLock::new();
    let load = |f: &str| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../schema")
            .join(f);
        let text = std::fs::read_to_string(path).unwrap();
        jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
    };
    let v = V.get_or_init(|| [load("step-spec.schema.json"), load("events.schema.json")]);
    &v[usize::from(name == "events")]
}

fn spec(step: &str, engine: Value, micro: Value) -> Value {
    let mut w = micro;
    w["kind"] = json!("micro");
    w["step"] = json!(step);
    json!({"spec_version": 3, "engine": engine, "workload": w,
           "clients": 3, "seed": 9, "report_interval_ms": 100})
}

fn micro_for(step: &str) -> Value {
    match step {
        "load" | "cleanup" => json!({"tables": 2, "rows": 2500}),
        _ => json!({"tables": 2, "rows": 2500, "range_size": 20, "duration_s": 0.3}),
    }
}

/// Run on a spec given on stdin: (exit code, events, stderr).
fn run(spec: &Value) -> (i32, Vec<Value>, String) {
    let out = Command::cargo_bin("dbregress-loadgen")
        .unwrap()
        .arg("-")
        .write_stdin(spec.to_string())
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for e in &events {
        let errors: Vec<String> = validator("events")
            .iter_errors(e)
            .map(|x| x.to_string())
            .collect();
        assert!(errors.is_empty(), "event {e} breaks the schema: {errors:?}");
    }
    let stderr = String::from_utf8(out.stderr).unwrap();
    (out.status.code().unwrap_or(-1), events, stderr)
}

fn summary(step: &str, r: &(i32, Vec<Value>, String)) -> Value {
    assert_eq!(r.0, 0, "{step}: {}", r.2);
    let last = r.1.last().expect("some output").clone();
    assert_eq!(last["type"], "summary", "{step}: {last}");
    last
}

#[test]
fn every_micro_step_runs_and_prints_valid_events() {
    for step in STEPS {
        let s = spec(
            step,
            json!({"driver": "null", "latency_us": 100}),
            micro_for(step),
        );
        assert!(
            validator("spec").is_valid(&s),
            "test spec {s} breaks the schema"
        );
        let r = run(&s);
        let sum = summary(step, &r);
        assert_eq!(r.1[0]["step"], step);
        let q_op = sum["q_op"].as_str().unwrap();
        let ops = sum["ops"][q_op]["ops"].as_u64().unwrap();
        assert!(ops > 0, "{step}: no {q_op} operations");
        let checks = &sum["checks"];
        assert_eq!(checks["rows_expected"], checks["rows_found"], "{step}");
        assert_eq!(
            checks["point_rows_expected"], checks["point_rows_found"],
            "{step}"
        );
        let intervals: u64 =
            r.1.iter()
                .filter(|e| e["type"] == "interval")
                .map(|e| e["ops"][q_op]["ops"].as_u64().unwrap())
                .sum();
        assert_eq!(intervals, ops, "{step}: intervals add up to the summary");
    }
}

#[test]
fn steps_report_their_op_kind_and_checks() {
    let null = || json!({"driver": "null"});
    let cases = [
        ("load", "insert", "rows"),
        ("point-query", "point_query", "ops"),
        ("range-covered-si", "range_query", "ops"),
        ("scan", "query", "ops"),
        ("read-write", "transaction", "ops"),
        ("update-zipf", "update", "ops"),
        ("delete", "delete", "ops"),
    ];
    for (step, q_op, unit) in cases {
        let sum = summary(step, &run(&spec(step, null(), micro_for(step))));
        assert_eq!(sum["q_op"], q_op, "{step}");
        assert_eq!(sum["q_unit"], unit, "{step}");
    }
    let load = summary("load", &run(&spec("load", null(), micro_for("load"))));
    assert_eq!(load["ops"]["insert"]["rows"], 5000);
    assert_eq!(load["ops"]["create_index"]["ops"], 2);
    assert_eq!(load["checks"]["rows_found"], 5000);
    // point-query must find one row per query: ids 1..rows all exist.
    let pq = summary("pq", &run(&spec("point-query", null(), micro_for("pq"))));
    let n = pq["ops"]["point_query"]["ops"].as_u64().unwrap();
    assert_eq!(pq["checks"]["point_rows_expected"], n);
    // insert and delete are checked against the rows the tables hold afterwards.
    for step in ["insert", "delete"] {
        let sum = summary(step, &run(&spec(step, null(), micro_for(step))));
        let rows = sum["ops"][step]["rows"].as_u64().unwrap();
        let found = sum["checks"]["rows_found"].as_u64().unwrap();
        let expected = if step == "insert" {
            5000 + rows
        } else {
            5000 - rows
        };
        assert_eq!(found, expected, "{step}");
    }
}

#[test]
fn injected_errors_in_transactions_are_counted() {
    let engine = json!({"driver": "null", "latency_us": 50, "fail_every": 5});
    let sum = summary("rw", &run(&spec("read-write", engine, micro_for("rw"))));
    assert!(sum["ops"]["transaction"]["errors"].as_u64().unwrap() > 0);
}

#[test]
fn a_bad_micro_spec_names_the_problem() {
    let null = json!({"driver": "null"});
    let cases = [
        (spec("scan", null.clone(), json!({})), "workload.duration_s"),
        (
            spec("l.i0", null.clone(), json!({})),
            "unknown variant `l.i0`",
        ),
        (
            spec(
                "load",
                null.clone(),
                json!({"rows": 100, "range_size": 101}),
            ),
            "range_size",
        ),
        (spec("load", null.clone(), json!({"tablez": 1})), "tablez"),
    ];
    for (s, needle) in cases {
        let (code, events, stderr) = run(&s);
        assert_eq!(code, 1, "{s}");
        assert!(
            stderr.contains(needle),
            "stderr should name {needle}: {stderr}"
        );
        assert_eq!(events.len(), 1);
    }
    let mut insert = spec("point-query", null, json!({}));
    insert["workload"]["kind"] = json!("insert");
    let (code, _, stderr) = run(&insert);
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown variant `point-query`"), "{stderr}");
}

#[test]
fn the_mysql_engine_spec_validates() {
    let engine = json!({"driver": "mysql", "socket": "/tmp/x.sock", "database": "test",
                        "storage_engine": "RocksDB"});
    assert!(validator("spec").is_valid(&spec("load", engine, json!({}))));
    let bad = json!({"driver": "mysql", "socket": "/tmp/x.sock", "database": "t", "port": 3306});
    assert!(!validator("spec").is_valid(&spec("load", bad, json!({}))));
}
