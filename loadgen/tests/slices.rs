//! A step run in slices (spec `slices`) through the built binary with the null driver:
//! after go and after each slice the loadgen waits for `run`, and the step's own clock
//! stands still meanwhile, so the caller's pauses change neither the step's duration,
//! nor its rate, nor its paced writers' schedule.

mod common;

use common::{spec_schema, workload, Session};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How long the test waits before each `run`: far longer than a slice.
const PAUSE: Duration = Duration::from_millis(200);

fn spec(wl: Value, clients: u32, warmup_s: f64, slices: Value) -> Value {
    let s = json!({"spec_version": 3, "engine": {"driver": "null", "latency_us": 100},
                   "workload": wl, "clients": clients, "seed": 5,
                   "report_interval_ms": 100, "handshake": true, "warmup_s": warmup_s,
                   "slices": slices});
    assert!(
        spec_schema().is_valid(&s),
        "test spec {s} breaks the schema"
    );
    s
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// What a sliced step printed.
struct Sliced {
    /// The slice events after n 0.
    slices: Vec<Value>,
    stopped: Value,
    summary: Value,
    /// Wall seconds from go to stopped.
    wall_s: f64,
    events: Vec<Value>,
}

impl Sliced {
    /// The summary's count of Q (rows or ops of q_op).
    fn q_count(&self) -> u64 {
        let s = &self.summary;
        let unit = s["q_unit"].as_str().unwrap();
        u(&s["ops"][s["q_op"].as_str().unwrap()][unit])
    }

    fn sum(&self, field: &str) -> u64 {
        self.slices.iter().map(|s| u(&s[field])).sum()
    }
}

/// go, then answer each slice with run after PAUSE (nothing may be printed meanwhile)
/// until the last one, which `stopped` follows at once; then check and the summary.
fn through(s: &mut Session) -> Sliced {
    s.until("ready");
    s.say("go");
    let go = Instant::now();
    let first = s.until("slice");
    assert_eq!((u(&first["n"]), f(&first["t_s"])), (0, 0.0), "{first}");
    assert_eq!((f(&first["slice_s"]), u(&first["q"])), (0.0, 0));
    let mut slices = vec![];
    let mut answered = first;
    loop {
        assert!(
            s.quiet_for(PAUSE),
            "nothing runs between slices, after {answered}"
        );
        s.say("run");
        let e = s.until("slice");
        assert_eq!(u(&e["n"]), slices.len() as u64 + 1, "slices count on: {e}");
        slices.push(e.clone());
        if e["last"] == json!(true) {
            break;
        }
        assert_eq!(e["last"], json!(false), "{e}");
        answered = e;
    }
    let stopped = s.next().expect("an event after the last slice");
    assert_eq!(stopped["type"], "stopped", "stopped follows the last slice");
    let wall_s = go.elapsed().as_secs_f64();
    s.say("check");
    let summary = s.until("summary");
    assert_eq!(s.finish(), 0);
    Sliced {
        slices,
        stopped,
        summary,
        wall_s,
        events: s.events.clone(),
    }
}

/// A timed step in slices of `ms`: its duration, Q and paced writer (`writer`, the op
/// kind) in own time.
fn check_timed(r: &Sliced, duration_s: f64, warmup_s: f64, ms: f64, writer: &str) {
    let k = r.slices.len();
    let own_s = duration_s + warmup_s;
    assert!(k as f64 >= own_s / ms * 0.8, "{k} slices of {ms} s");
    let elapsed = f(&r.summary["elapsed_s"]);
    assert!(
        (elapsed - duration_s).abs() < 0.15 * duration_s,
        "elapsed_s {elapsed} for a {duration_s} s step"
    );
    assert!(
        r.wall_s > own_s + (k - 1) as f64 * PAUSE.as_secs_f64(),
        "the pauses took wall time: {} s",
        r.wall_s
    );
    assert_eq!(r.sum("q"), r.q_count(), "the slices' q add up to Q");
    if warmup_s > 0.0 {
        assert!(r.sum("q_all") > r.sum("q"), "q_all has the warm-up");
    } else {
        assert_eq!(r.sum("q_all"), r.sum("q"));
    }
    let mut t = 0.0;
    for (i, s) in r.slices.iter().enumerate() {
        let (t_s, slice_s) = (f(&s["t_s"]), f(&s["slice_s"]));
        assert!(t_s > t, "t_s goes on: {s}");
        assert!(
            (t_s - t - slice_s).abs() < 1e-6,
            "a slice begins where the last ended: {s}"
        );
        t = t_s;
        assert!(slice_s < ms + 0.1, "slice {s}: no pause in a slice's time");
        if i + 1 < k {
            assert!(slice_s >= ms - 1e-6, "slice {s} ended before its time");
            assert!(u(&s["q_all"]) > 0, "every slice runs: {s}");
        }
    }
    assert!((t - f(&r.stopped["t_s"])).abs() < 1e-3, "{:?}", r.stopped);
    assert!((f(&r.stopped["t_s"]) - own_s).abs() < 0.15 * own_s);
    // The intervals tick in own time too: none after the step's own end.
    for e in r.events.iter().filter(|e| e["type"] == "interval") {
        assert!(f(&e["t_s"]) <= t + 1e-6, "{e}");
    }
    let m = r.events.iter().find(|e| e["type"] == "measuring").unwrap();
    assert!((f(&m["t_s"]) - warmup_s).abs() < 1e-6, "{m}");
    // The paced writer kept its rate in own time: no burst after a pause.
    let w = &r.summary["ops"][writer];
    let target = f(&w["target_rows_per_s"]);
    let rows = f(&w["rows"]);
    let want = target * elapsed;
    assert!(
        (rows - want).abs() < 0.15 * want,
        "{writer}: {rows} rows in {elapsed} own s at {target}/s ({} s of wall time)",
        r.wall_s
    );
}

#[test]
fn a_timed_step_in_slices_keeps_its_own_time() {
    // 2 clients, each 1000 rows/s in batches of 10 on paced writers.
    let ins = json!({"duration_s": 1, "insert_rate": 1000, "rows_per_commit": 10});
    let s = spec(workload("insert", "qp", ins), 2, 0.2, json!({"ms": 50}));
    let mut session = Session::start(&s, "sliced-qp");
    let r = through(&mut session);
    check_timed(&r, 1.0, 0.2, 0.05, "insert");
    assert_eq!(
        r.summary["checks"]["point_rows_found"],
        r.summary["checks"]["point_rows_expected"]
    );
    assert_eq!(
        r.summary["checks"]["rows_found"],
        r.summary["checks"]["rows_expected"]
    );
}

#[test]
fn a_kv_writer_in_slices_keeps_its_rate_in_own_time() {
    // 116-byte entries at 0.11064 MiB/s: 1000 puts/s by client 1's writer.
    let kv = json!({"keys": 1000, "key_size": 16, "value_size": 100, "duration_s": 1,
                    "writer_mb_per_s": 1000.0 * 116.0 / 1048576.0});
    let s = spec(
        workload("kv", "readwhilewriting", kv),
        2,
        0.0,
        json!({"ms": 100}),
    );
    let mut session = Session::start(&s, "sliced-kv");
    let r = through(&mut session);
    check_timed(&r, 1.0, 0.0, 0.1, "put");
}

#[test]
fn a_fixed_work_step_in_slices_of_q_calls() {
    // 2 clients x 100 inserts of 100 rows: slices of 30 insert calls, 20 in the last.
    let ins = json!({"rows": 10000, "rows_per_commit": 100});
    let s = spec(
        workload("insert", "l.i0", ins),
        2,
        0.0,
        json!({"q_calls": 30}),
    );
    let mut session = Session::start(&s, "sliced-load");
    let r = through(&mut session);
    let q: Vec<u64> = r.slices.iter().map(|s| u(&s["q"])).collect();
    assert_eq!(q, [3000, 3000, 3000, 3000, 3000, 3000, 2000]);
    assert_eq!(r.sum("q"), r.q_count());
    assert_eq!(r.q_count(), 20000);
    assert_eq!(r.sum("q_all"), 20000);
    assert_eq!(u(&r.summary["checks"]["rows_found"]), 20000);
    // The step's time is its slices' time, not the pauses'.
    let elapsed = f(&r.summary["elapsed_s"]);
    let sliced: f64 = r.slices.iter().map(|s| f(&s["slice_s"])).sum();
    assert!((elapsed - sliced).abs() < 1e-6, "{elapsed} vs {sliced}");
    assert!(
        elapsed < 0.5 && r.wall_s > 6.0 * PAUSE.as_secs_f64(),
        "{elapsed} {}",
        r.wall_s
    );
}

#[test]
fn a_step_whose_q_is_one_call_runs_in_one_slice() {
    let ins = json!({"expected_rows": [500, 500]});
    let s = spec(
        workload("insert", "l.x", ins),
        2,
        0.0,
        json!({"q_calls": 5}),
    );
    let mut session = Session::start(&s, "sliced-index");
    let r = through(&mut session);
    assert_eq!(r.slices.len(), 1);
    assert_eq!(u(&r.slices[0]["q"]), 1000);
    assert_eq!(r.q_count(), 1000);
}

#[test]
fn stdin_closing_while_waiting_for_run_ends_the_step() {
    let ins = json!({"duration_s": 1, "insert_rate": 0});
    let s = spec(workload("insert", "qr", ins), 1, 0.0, json!({"ms": 50}));
    let mut session = Session::start(&s, "sliced-close");
    session.until("ready");
    session.say("go");
    session.until("slice");
    session.say("run");
    let e = session.until("slice");
    assert_eq!(u(&e["n"]), 1);
    assert_eq!(session.finish(), 1);
    let last = session.events.last().unwrap();
    assert_eq!(last["type"], "fatal");
    assert_eq!(last["message"], "stdin closed before run");
}
