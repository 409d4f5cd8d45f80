//! The kv workload through the built binary: every step with the null driver, and,
//! when DBREGRESS_TEST_ROCKSDB_LIB (and DBREGRESS_TEST_ROCKSDB_VERSION) name a RocksDB
//! library, every step against it in order. Every line must match the events schema.

mod common;

use common::{run, spec_schema, workload, Run};
use serde_json::{json, Value};

const STEPS: [(&str, &str); 11] = [
    ("fillseq", "put"),
    ("revrange", "seek_prev"),
    ("overwritesome", "put"),
    ("flush_mt_l0", "compact"),
    ("readrandom", "get"),
    ("fwdrange", "seek_next"),
    ("revrangewhilewriting", "seek_prev"),
    ("fwdrangewhilewriting", "seek_next"),
    ("readwhilewriting", "get"),
    ("overwriteandwait", "put"),
    ("overwrite", "put"),
];

fn timed(step: &str) -> bool {
    !matches!(step, "fillseq" | "overwritesome" | "flush_mt_l0")
}

fn kv_spec(step: &str, engine: &Value, clients: u32, kv: Value) -> Value {
    let s = json!({"spec_version": 3, "engine": engine, "workload": workload("kv", step, kv),
                   "clients": clients, "seed": 3, "report_interval_ms": 100});
    assert!(
        spec_schema().is_valid(&s),
        "test spec {s} breaks the schema"
    );
    s
}

fn sizes(step: &str, keys: u64, duration_s: f64) -> Value {
    let mut kv = json!({"keys": keys, "key_size": 16, "value_size": 100});
    if timed(step) {
        kv["duration_s"] = json!(duration_s);
    }
    kv
}

/// Checks every kv summary must pass; returns it.
fn check_summary<'a>(r: &'a Run, step: &str, q_op: &str) -> &'a Value {
    assert_eq!(r.code, 0, "{step}: {}", r.stderr);
    assert_eq!(r.events[0]["type"], "start");
    assert_eq!(r.events[0]["step"], step);
    let s = r.summary();
    assert_eq!(s["q_op"], q_op, "{step}");
    assert_eq!(s["q_unit"], "ops");
    assert!(
        s["ops"][q_op]["ops"].as_u64().unwrap() > 0,
        "{step}: no {q_op}"
    );
    assert_eq!(
        r.interval_ops(q_op),
        s["ops"][q_op]["ops"].as_u64().unwrap()
    );
    assert!(
        s["engine_stats"].is_object(),
        "{step}: engine_stats missing"
    );
    let c = &s["checks"];
    assert!(c["rows_expected"].is_null() && c["rows_found"].is_null());
    assert_eq!(c["point_rows_expected"], c["point_rows_found"]);
    s
}

#[test]
fn every_kv_step_runs_with_the_null_driver() {
    let engine = json!({"driver": "null", "latency_us": 50});
    for (step, q_op) in STEPS {
        let r = run(&kv_spec(step, &engine, 2, sizes(step, 5000, 0.3)));
        let s = check_summary(&r, step, q_op);
        let es = &s["engine_stats"];
        assert!(
            es["write_amp"].is_null() && es["lsm_bytes"].is_null(),
            "{step}"
        );
        if step == "readrandom" {
            let got = s["checks"]["point_rows_found"].as_u64().unwrap();
            assert_eq!(got, s["ops"]["get"]["ops"].as_u64().unwrap());
        }
        if step == "fillseq" {
            assert_eq!(s["ops"]["put"]["ops"], 5000, "fillseq runs on one client");
        }
        if step == "overwritesome" {
            assert_eq!(s["ops"]["put"]["ops"], 500, "10% of the keys");
        }
    }
}

#[test]
fn the_background_writer_keeps_to_its_byte_rate() {
    let engine = json!({"driver": "null", "latency_us": 20});
    let kv = json!({"keys": 1000, "key_size": 20, "value_size": 80, "duration_s": 2.0,
                    "writer_mb_per_s": 0.2});
    let r = run(&kv_spec("readwhilewriting", &engine, 1, kv));
    let s = check_summary(&r, "readwhilewriting", "get");
    let put = &s["ops"]["put"];
    let target = 0.2 * 1048576.0 / 100.0;
    assert!((put["target_rows_per_s"].as_f64().unwrap() - target).abs() < 1e-6);
    assert!(s["ops"]["get"]["target_rows_per_s"].is_null());
    let rate = put["ops"].as_f64().unwrap() / s["elapsed_s"].as_f64().unwrap();
    assert!(
        (0.9 * target..=1.1 * target).contains(&rate),
        "writer ran at {rate} puts/s, target {target}"
    );
}

#[test]
fn kv_spec_errors_name_the_field() {
    let null = json!({"driver": "null"});
    let bad = [
        (
            kv_spec("readrandom", &null, 1, json!({"duration_s": 1})),
            "workload.keys",
        ),
        (
            kv_spec("readrandom", &null, 1, json!({"keys": 5})),
            "workload.duration_s",
        ),
        (
            kv_spec("fillseq", &null, 1, json!({"keys": 5, "duration_s": 1})),
            "does not apply",
        ),
    ];
    for (s, field) in bad {
        assert!(run(&s).fatal().contains(field), "should name {field}");
    }
    let r = run(&kv_spec("flush_mt_l0", &null, 1, json!({})));
    check_summary(&r, "flush_mt_l0", "compact");
    let mut wrong = kv_spec("fillseq", &null, 1, json!({"keys": 5}));
    // Under another kind, the kv workload's fields are unknown, and so is its step.
    wrong["workload"]["kind"] = json!("insert");
    assert!(run(&wrong).fatal().contains("unknown field `keys`"));
    wrong["workload"].as_object_mut().unwrap().remove("keys");
    assert!(run(&wrong).fatal().contains("unknown variant `fillseq`"));
    let lib = json!({"driver": "rocksdb", "library": "/nonexistent/librocksdb.so",
                     "version": "7.8.3", "db_path": "/tmp/x", "options": {}});
    let r = run(&kv_spec("fillseq", &lib, 1, json!({"keys": 5})));
    assert!(r.fatal().contains("/nonexistent/librocksdb.so"));
}

/// Every step in order against a real library, then the ways a step must fail.
#[test]
fn every_kv_step_runs_against_rocksdb_when_a_library_is_given() {
    let Ok(library) = std::env::var("DBREGRESS_TEST_ROCKSDB_LIB") else {
        eprintln!("skipped: set DBREGRESS_TEST_ROCKSDB_LIB (and _VERSION) to test RocksDB");
        return;
    };
    let version = std::env::var("DBREGRESS_TEST_ROCKSDB_VERSION")
        .expect("DBREGRESS_TEST_ROCKSDB_VERSION must give the library's version");
    let dir = std::env::temp_dir().join(format!("lg-rocksdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let engine = json!({"driver": "rocksdb", "library": library, "version": version,
                        "db_path": dir.join("db"), "options": {"cache_mb": 16, "write_buffer_mb": 1}});
    let r = run(&kv_spec(
        "readrandom",
        &engine,
        1,
        sizes("readrandom", 100, 0.2),
    ));
    assert!(
        r.fatal().contains("cannot open RocksDB"),
        "a missing DB is named"
    );
    for (step, q_op) in STEPS {
        let r = run(&kv_spec(step, &engine, 2, sizes(step, 20_000, 0.3)));
        let s = check_summary(&r, step, q_op);
        let caps = r.events[0]["capabilities"]
            .as_array()
            .expect("capabilities");
        assert!(caps.iter().all(|c| c.is_string()));
        let es = &s["engine_stats"];
        assert!(es["lsm_bytes"].as_u64().unwrap() > 0, "{step}: {es}");
        assert!(es["stall_pct"].is_number(), "{step}: {es}");
        if step == "fillseq" {
            assert!(es["write_amp"].as_f64().unwrap() > 0.5, "{step}: {es}");
            assert_eq!(es["statistics"]["rocksdb.number.keys.written"], 20_000.0);
        }
    }
    let r = run(&kv_spec(
        "readrandom",
        &engine,
        1,
        sizes("readrandom", 40_000, 0.5),
    ));
    assert!(
        r.fatal().contains("not found"),
        "keys beyond the loaded ones are missing"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
