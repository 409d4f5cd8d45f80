//! The step spec: parse, apply the defaults, then cross-validate what the schema alone
//! cannot say. It composes the engine and the workload (workload_spec, whose variants'
//! own specs are insert_spec, kvspec and micro_spec). The spec's JSON Schema is generated
//! from these types (`schema()`, printed by `dbregress-loadgen --print-spec-schema`):
//! their doc comments become its descriptions and serde's defaults its defaults. The
//! checked-in copy, schema/step-spec.schema.json, is what `make schema` writes.

use crate::kvspec::RocksOptions;
use crate::slice_spec::SliceSpec;
use crate::window::WindowSpec;
use crate::workload_spec::Workload;
use anyhow::{bail, Context, Result};
use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The spec version this loadgen reads. 2 added handshake, warmup_s and inject_slowdown;
/// 3 made `workload` an object tagged by `kind`, holding the step and that workload's
/// own fields (version 2's sections `insert`, `cleanup`, `kv`, `micro`).
const SPEC_VERSION: u32 = 3;

// The doc comments of the types and fields below are the schema's descriptions (for
// notes to the reader of this code, use plain comments); serde's defaults are its
// defaults; schemars attributes add the bounds serde's types do not imply.

/// What dbregress-loadgen is told to do: one step of one workload against one running
/// engine. Given as a file argument, or on stdin when neither handshake nor
/// wait_before_close is set. Version 3 made workload an object tagged by kind, which
/// holds the step and that workload's own fields; the loadgen reads version 3 only.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "dbregress step spec, version 3",
    extend("$id" = "https://dbregress.dev/schema/step-spec-3.json")
)]
pub struct StepSpec {
    /// 3: workload is an object tagged by kind
    // check_version reads it before the spec is typed: a field for the schema only.
    #[schemars(schema_with = "spec_version_schema")]
    #[allow(dead_code)]
    spec_version: u32,
    pub engine: EngineSpec,
    pub workload: Workload,
    /// insert: one table per client, pi1..piN. kv: reader/writer threads (fillseq always
    /// uses 1). micro: connections, each picking a table per statement as sysbench does
    /// (load and cleanup: client i takes tables i, i+clients, ...)
    #[schemars(range(min = 1))]
    pub clients: u32,
    /// Seed of the random generators; client i uses seed + i
    pub seed: u64,
    #[serde(default = "default_report_interval_ms")]
    #[schemars(range(min = 10))]
    pub report_interval_ms: u64,
    /// After the summary line, keep the connections open until stdin closes, so the caller
    /// can read the server's counters while its backends still live. Needs the spec in a
    /// file.
    #[serde(default)]
    pub wait_before_close: bool,
    /// Let the caller time the step's phases (events schema): after 'ready' wait for the
    /// line go on stdin, which starts the step's clock; after 'stopped' wait for the line
    /// check before the end-of-step checks. stdin closing before either is fatal. Needs the
    /// spec in a file. false: the loadgen runs on its own and reads stdin only for
    /// wait_before_close.
    #[serde(default)]
    pub handshake: bool,
    /// Steps that run for a duration (qr, qp, the kv and micro steps with a duration_s)
    /// first run this many seconds of the same workload, then print 'measuring' and go on
    /// without a pause: the summary covers only what follows, the intervals cover both.
    /// Their run lasts warmup_s + the duration. Fixed-work steps (l.i0, l.x, l.i1, l.i2,
    /// cleanup, fillseq, overwritesome, flush_mt_l0, micro load) ignore it and print
    /// 'measuring' right after go.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub warmup_s: f64,
    /// A fraction F: after each timed driver call the client busy-waits F times the call's
    /// own duration (not counted in its latency), so a closed-loop step's Q falls by about
    /// F/(1+F) whatever the engine. For checking that a comparison detects a known
    /// regression.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub inject_slowdown: f64,
    /// Before the clients set up (untimed, before 'ready'), let the engine's background
    /// work finish: an embedded RocksDB flushes its memtables and waits for compaction;
    /// a server gets the post-write cleanup's engine part on one connection (MyRocks:
    /// flush memtables and compact L0; InnoDB: write dirty pages; PostgreSQL:
    /// CHECKPOINT). For counting replays of write steps, whose counts would otherwise
    /// depend on where a flush or compaction left off when the window opened
    #[serde(default)]
    pub settle_first: bool,
    pub window: Option<WindowSpec>,
    pub slices: Option<SliceSpec>,
}

/// Which engine to drive and how to reach it; `driver` names the registered driver.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(tag = "driver", rename_all = "lowercase", deny_unknown_fields)]
pub enum EngineSpec {
    /// A PostgreSQL server on a unix socket; trust authentication.
    Postgres {
        /// Directory holding .s.PGSQL.<port>
        socket_dir: String,
        #[schemars(range(min = 1))]
        port: u16,
        user: String,
        database: String,
    },
    /// No engine: every operation sleeps a scripted latency. For testing the scheduler and
    /// reports only.
    Null {
        /// Latency of every operation, microseconds
        #[serde(default)]
        latency_us: u64,
        /// Every Nth operation fails with an ignorable error (0 = never)
        #[serde(default)]
        fail_every: u64,
    },
    /// A MySQL-family server (MySQL 5.7/8.x, MariaDB 10.2+, Percona, MyRocks) on a unix
    /// socket; the user logs in with an empty password (mysql_native_password,
    /// caching_sha2_password, unix_socket, or skip-grant-tables). The loadgen creates the
    /// database if missing.
    Mysql {
        /// Path of the server's unix socket file
        socket: String,
        #[serde(default = "default_mysql_user")]
        user: String,
        database: String,
        /// ENGINE= of the tables; also picks the post-write cleanup (InnoDB: flush dirty
        /// pages; RocksDB: flush the memtable, compact L0)
        #[serde(default = "default_storage_engine")]
        #[schemars(extend("enum" = ["InnoDB", "RocksDB"]))]
        storage_engine: String,
    },
    /// RocksDB, embedded: the loadgen dlopens the library (a rocksdbjni jar's
    /// librocksdbjni-linux64.so, Debian's librocksdb, or a user's build) and opens the
    /// database itself. Each step opens the existing database (fillseq creates it).
    Rocksdb {
        /// Path of the shared library exporting the RocksDB C API
        library: String,
        /// The library's RocksDB version (major.minor[.patch]); decides the calling
        /// conventions that changed (bloom bits per key int before 6.24, double after) and
        /// the capabilities that need a version (auto hyper clock cache from 8.7)
        #[schemars(pattern(r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"))]
        version: String,
        db_path: String,
        options: RocksOptions,
    },
}

fn default_mysql_user() -> String {
    "root".into()
}

fn default_storage_engine() -> String {
    "InnoDB".into()
}

fn spec_version_schema(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"const": SPEC_VERSION})
}

/// The JSON Schema of the step spec (draft 2020-12), as schema/step-spec.schema.json holds
/// it: every subschema inline, as consumers read a field's schema in place; descriptions
/// one line per paragraph; an optional field absent, never null.
pub fn schema() -> Schema {
    SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .with_transform(RecursiveTransform(absent_not_null as fn(&mut Schema)))
        .with_transform(RecursiveTransform(unwrap_descriptions as fn(&mut Schema)))
        .into_generator()
        .into_root_schema_for::<StepSpec>()
}

/// schemars lets an `Option` field be null, which serde reads as absent; the spec's
/// writers leave such a field out, and the schema keeps them to that.
fn absent_not_null(schema: &mut Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let null_schema = |v: &Value| v.get("type") == Some(&Value::from("null"));
    if let Some(Value::Array(any_of)) = obj.get("anyOf") {
        if let [a, b] = any_of.as_slice() {
            let other = match (null_schema(a), null_schema(b)) {
                (true, false) => Some(b.clone()),
                (false, true) => Some(a.clone()),
                _ => None,
            };
            if let Some(Value::Object(other)) = other {
                obj.remove("anyOf");
                for (k, v) in other {
                    obj.entry(k).or_insert(v);
                }
            }
        }
    }
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            obj.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
}

/// Doc comments keep their source's line breaks; a description keeps only the blank lines
/// between paragraphs.
fn unwrap_descriptions(schema: &mut Schema) {
    if let Some(Value::String(d)) = schema.get_mut("description") {
        let paragraphs: Vec<String> = d.split("\n\n").map(|p| p.replace('\n', " ")).collect();
        *d = paragraphs.join("\n\n");
    }
}

impl EngineSpec {
    pub fn driver_name(&self) -> &'static str {
        match self {
            EngineSpec::Postgres { .. } => "postgres",
            EngineSpec::Null { .. } => "null",
            EngineSpec::Mysql { .. } => "mysql",
            EngineSpec::Rocksdb { .. } => "rocksdb",
        }
    }
}

fn default_report_interval_ms() -> u64 {
    1000
}

impl StepSpec {
    /// Parse and validate a spec given as JSON text.
    pub fn from_json(text: &str) -> Result<StepSpec> {
        // The version first: an older spec's layout would otherwise fail on a field it
        // places elsewhere, with an error that does not say why.
        let value: Value = serde_json::from_str(text).context("invalid step spec")?;
        check_version(&value).context("invalid step spec")?;
        let spec: StepSpec = serde_json::from_value(value).context("invalid step spec")?;
        spec.validate().context("invalid step spec")?;
        Ok(spec)
    }

    /// The warm-up this step runs before its measured window: warmup_s for steps that
    /// run for a duration, none for fixed-work steps (which ignore warmup_s) nor with a
    /// profiler's window (whose skip_ops is its warm-up).
    pub fn warmup(&self) -> Duration {
        if self.workload.runs_for_a_duration() && self.window.is_none() {
            Duration::from_secs_f64(self.warmup_s)
        } else {
            Duration::ZERO
        }
    }

    /// When a step that started at `start` and measures for `duration` ends; with a
    /// profiler's window, a year on: the window's close ends it.
    pub fn deadline(&self, start: Instant, duration: Duration) -> Instant {
        if self.window.is_some() {
            return start + Duration::from_secs(365 * 86400);
        }
        start + self.warmup() + duration
    }

    fn validate(&self) -> Result<()> {
        if self.clients == 0 {
            bail!("clients must be at least 1");
        }
        if self.report_interval_ms < 10 {
            bail!(
                "report_interval_ms must be at least 10, got {}",
                self.report_interval_ms
            );
        }
        for (name, v) in [
            ("warmup_s", self.warmup_s),
            ("inject_slowdown", self.inject_slowdown),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                bail!("{name} must be a number >= 0, got {v}");
            }
        }
        self.validate_driver()?;
        self.workload.validate(self.clients)?;
        if let EngineSpec::Rocksdb { options, .. } = &self.engine {
            options.validate()?;
        }
        if let Some(w) = &self.window {
            w.validate(self.handshake)?;
            // A probe moves the open from the one calling thread: no other client may
            // have passed it; only an embedded engine's statistics say how warm it is.
            if w.probes() && (self.clients != 1 || !matches!(self.workload, Workload::Kv(_))) {
                bail!("window.until_hit_rate needs one client and a kv (RocksDB) step");
            }
        }
        if let Some(s) = &self.slices {
            if self.window.is_some() {
                bail!("slices and window do not go together: use one or the other");
            }
            s.validate(self.handshake)?;
        }
        Ok(())
    }

    /// The driver speaks the workload.
    fn validate_driver(&self) -> Result<()> {
        let driver_speaks = match &self.engine {
            EngineSpec::Postgres { .. } | EngineSpec::Mysql { .. } => {
                matches!(self.workload, Workload::Insert(_) | Workload::Micro(_))
            }
            EngineSpec::Rocksdb { .. } => matches!(self.workload, Workload::Kv(_)),
            EngineSpec::Null { .. } => true,
        };
        if !driver_speaks {
            bail!(
                "driver {} does not run workload {}",
                self.engine.driver_name(),
                self.workload.name()
            );
        }
        Ok(())
    }
}

/// The spec's version is the one this loadgen reads.
fn check_version(spec: &Value) -> Result<()> {
    match spec.get("spec_version") {
        None => bail!("spec_version is missing; this loadgen reads version {SPEC_VERSION}"),
        Some(v) if v.as_u64() == Some(SPEC_VERSION.into()) => Ok(()),
        Some(v) => bail!(
            "spec_version is {v}, this loadgen reads version {SPEC_VERSION} only \
             (3 moved the step and the workload's section into workload, tagged by kind)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insert_spec::InsertSpec;

    /// An insert spec with the workload's fields `fields` (a JSON object's inside).
    fn spec(step: &str, fields: &str) -> Result<StepSpec> {
        with(step, fields, r#""spec_version": 3"#)
    }

    fn with(step: &str, fields: &str, extra: &str) -> Result<StepSpec> {
        let comma = if fields.is_empty() { "" } else { ", " };
        StepSpec::from_json(&format!(
            r#"{{"engine": {{"driver": "null"}}, "clients": 2, "seed": 7, {extra},
                "workload": {{"kind": "insert", "step": "{step}"{comma}{fields}}}}}"#
        ))
    }

    fn insert(s: &StepSpec) -> &InsertSpec {
        match &s.workload {
            Workload::Insert(i) => i,
            other => panic!("an insert workload, not {}", other.name()),
        }
    }

    fn error_of(r: Result<StepSpec>) -> String {
        format!("{:#}", r.expect_err("spec should be rejected"))
    }

    fn checked_in() -> Value {
        serde_json::from_str(include_str!("../../schema/step-spec.schema.json")).unwrap()
    }

    #[test]
    fn the_checked_in_schema_is_the_generated_one() {
        assert!(
            schema().as_value() == &checked_in(),
            "schema/step-spec.schema.json is stale: run `make schema` to regenerate it"
        );
    }

    #[test]
    fn each_workload_lists_its_own_steps() {
        let schema = schema();
        let variants = schema.as_value()["properties"]["workload"]["oneOf"]
            .as_array()
            .unwrap();
        let mut counts = Vec::new();
        for v in variants {
            let kind = v["properties"]["kind"]["const"].as_str().unwrap();
            let names = v["properties"]["step"]["enum"].as_array().unwrap();
            for name in names {
                let fields = format!(r#"{{"kind": "{kind}", "step": {name}}}"#);
                let w: Workload = serde_json::from_str(&fields).unwrap();
                assert_eq!(w.step_name(), name.as_str().unwrap());
            }
            counts.push((kind, names.len()));
        }
        let micro = crate::micro_spec::MicroStep::ALL.len();
        assert_eq!(counts, [("insert", 7), ("kv", 11), ("micro", micro)]);
    }

    #[test]
    fn a_step_or_section_of_another_workload_is_refused() {
        let e = error_of(spec("fillseq", ""));
        assert!(e.contains("unknown variant `fillseq`"), "{e}");
        let e = error_of(spec("l.i0", r#""rows": 1, "keys": 5"#));
        assert!(e.contains("unknown field `keys`"), "{e}");
        let e = error_of(StepSpec::from_json(
            r#"{"spec_version": 3, "engine": {"driver": "null"}, "clients": 1, "seed": 0,
                "workload": {"kind": "kv", "step": "scan"}}"#,
        ));
        assert!(e.contains("unknown variant `scan`"), "{e}");
        let e = error_of(StepSpec::from_json(
            r#"{"spec_version": 3, "engine": {"driver": "null"}, "clients": 1, "seed": 0,
                "workload": {"kind": "micro", "step": "load", "insert_rate": 1}}"#,
        ));
        assert!(e.contains("unknown field `insert_rate`"), "{e}");
    }

    #[test]
    fn defaults_follow_the_schema() {
        // Every top-level default in the schema, given explicitly, changes nothing.
        let schema = checked_in();
        let props = schema["properties"].as_object().unwrap();
        let given: serde_json::Map<String, Value> = props
            .iter()
            .filter(|(_, v)| v.get("default").is_some_and(|d| !d.is_object()))
            .map(|(k, v)| (k.clone(), v["default"].clone()))
            .collect();
        assert!(given.len() >= 5, "{given:?}");
        let plain = r#"{"spec_version": 3, "engine": {"driver": "null"}, "clients": 2, "seed": 7,
            "workload": {"kind": "insert", "step": "qp", "duration_s": 1, "insert_rate": 0}}"#;
        let mut with: Value = serde_json::from_str(plain).unwrap();
        with.as_object_mut().unwrap().extend(given);
        let from_schema = StepSpec::from_json(&with.to_string()).unwrap();
        let from_serde = StepSpec::from_json(plain).unwrap();
        assert_eq!(format!("{from_schema:?}"), format!("{from_serde:?}"));
        let s = spec("l.i1", r#""rows": 10"#).unwrap();
        assert_eq!(s.report_interval_ms, 1000);
        assert_eq!(insert(&s).rows_per_commit(), 50);
        assert!(!s.wait_before_close);
        let rows_per_commit = |step| insert(&spec(step, r#""rows": 1"#).unwrap()).rows_per_commit();
        assert_eq!(rows_per_commit("l.i0"), 100);
        assert_eq!(rows_per_commit("l.i2"), 5);
        let q = spec("qp", r#""duration_s": 1.5, "insert_rate": 100"#).unwrap();
        assert_eq!(insert(&q).rows_per_commit(), 10);
        assert_eq!(insert(&q).duration(), Duration::from_millis(1500));
        let workload = schema["properties"]["workload"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["properties"]["kind"]["const"] == "insert")
            .unwrap();
        let cleanup = &workload["properties"]["cleanup"]["properties"]["statements_timeout_s"];
        let cleanup = Duration::from_secs_f64(cleanup["default"].as_f64().unwrap());
        assert_eq!(insert(&q).cleanup_timeout(), cleanup);
        assert!(!q.handshake);
        assert_eq!((q.warmup(), q.inject_slowdown), (Duration::ZERO, 0.0));
    }

    #[test]
    fn warmup_applies_to_duration_steps_only() {
        let q = r#""duration_s": 2, "insert_rate": 0"#;
        let extra = r#""spec_version": 3, "warmup_s": 1.5, "handshake": true"#;
        let s = with("qr", q, extra).unwrap();
        assert!(s.handshake);
        assert_eq!(s.warmup(), Duration::from_millis(1500));
        let t0 = Instant::now();
        assert_eq!(
            s.deadline(t0, insert(&s).duration()),
            t0 + Duration::from_millis(3500)
        );
        let load = with("l.i0", r#""rows": 5"#, extra).unwrap();
        assert_eq!(
            load.warmup(),
            Duration::ZERO,
            "fixed-work steps ignore warmup_s"
        );
    }

    #[test]
    fn slices_take_one_limit_need_the_handshake_and_exclude_a_window() {
        let q = r#""duration_s": 2, "insert_rate": 0"#;
        let hs = r#""spec_version": 3, "handshake": true"#;
        let slices = |s: &str| format!(r#"{hs}, "slices": {s}"#);
        let s = with("qr", q, &slices(r#"{"ms": 100}"#)).unwrap();
        assert_eq!(s.slices.and_then(|s| s.ms), Some(100));
        let s = with("l.i0", r#""rows": 5"#, &slices(r#"{"q_calls": 5000}"#)).unwrap();
        assert_eq!(s.slices.and_then(|s| s.q_calls), Some(5000));
        let bad = [
            (r#"{"ms": 100, "q_calls": 5}"#, "not both"),
            (r#"{}"#, "slices needs one of ms"),
            (r#"{"ms": 0}"#, "slices.ms must be at least 1"),
            (r#"{"q_calls": 0}"#, "slices.q_calls must be at least 1"),
            (r#"{"ms": 10, "len": 1}"#, "unknown field `len`"),
        ];
        for (given, why) in bad {
            let e = error_of(with("qr", q, &slices(given)));
            assert!(e.contains(why), "{given}: {e}");
        }
        let e = error_of(with("qr", q, r#""spec_version": 3, "slices": {"ms": 100}"#));
        assert!(e.contains("slices needs the handshake"), "{e}");
        let e = error_of(with(
            "qr",
            q,
            &slices(r#"{"ms": 100}, "window": {"ops": 5}"#),
        ));
        assert!(e.contains("slices and window do not go together"), "{e}");
    }

    #[test]
    fn only_version_3_reads() {
        let q = r#""duration_s": 2, "insert_rate": 0"#;
        let e = error_of(with(
            "qr",
            q,
            r#""spec_version": 3, "inject_slowdown": -0.1"#,
        ));
        assert!(e.contains("inject_slowdown must be a number >= 0"), "{e}");
        for old in [1, 2, 4] {
            let e = error_of(with("qr", q, &format!(r#""spec_version": {old}"#)));
            assert!(
                e.contains(&format!(
                    "spec_version is {old}, this loadgen reads version 3"
                )),
                "{e}"
            );
        }
        // A version 2 spec is named as such, not by the first field it places elsewhere.
        let v2 = r#"{"spec_version": 2, "engine": {"driver": "null"}, "workload": "insert",
                     "step": "l.i0", "clients": 1, "seed": 0, "insert": {"rows": 1}}"#;
        assert!(error_of(StepSpec::from_json(v2)).contains("spec_version is 2"));
        let e = error_of(StepSpec::from_json(r#"{"clients": 1}"#));
        assert!(e.contains("spec_version is missing"), "{e}");
    }

    #[test]
    fn load_steps_need_rows() {
        let e = error_of(spec("l.i0", ""));
        assert!(e.contains("workload.rows is required for step l.i0"), "{e}");
        let e = error_of(spec(
            "qr",
            r#""rows": 5, "duration_s": 1, "insert_rate": 0"#,
        ));
        assert!(e.contains("workload.rows does not apply to step qr"), "{e}");
    }

    #[test]
    fn query_steps_need_duration_and_rate() {
        assert!(error_of(spec("qp", r#""insert_rate": 1"#)).contains("workload.duration_s"));
        assert!(error_of(spec("qp", r#""duration_s": 1"#)).contains("workload.insert_rate"));
        assert!(error_of(spec("qp", r#""duration_s": -1, "insert_rate": 1"#)).contains("> 0"));
        assert!(error_of(spec("l.x", r#""duration_s": 1"#)).contains("does not apply"));
    }

    #[test]
    fn the_cleanup_section_is_the_cleanup_steps() {
        let c = spec("cleanup", r#""cleanup": {"statements_timeout_s": 2}"#).unwrap();
        assert_eq!(insert(&c).cleanup_timeout(), Duration::from_secs(2));
        let e = error_of(spec("l.x", r#""cleanup": {}"#));
        assert!(e.contains("applies only to step cleanup, not l.x"), "{e}");
    }

    #[test]
    fn unknown_fields_and_values_are_named() {
        assert!(error_of(spec("l.i0", r#""rows": 1, "rowz": 2"#)).contains("rowz"));
        assert!(error_of(spec("l.i9", "")).contains("l.i9"));
        assert!(error_of(spec("l.x", r#""rows_per_commit": 3"#)).contains("rows_per_commit"));
        assert!(error_of(spec("l.x", r#""expected_rows": [1]"#)).contains("expected_rows"));
        let e = error_of(with("l.x", "", r#""spec_version": 3, "insert": {}"#));
        assert!(e.contains("unknown field `insert`"), "{e}");
    }

    #[test]
    fn engine_variants_parse() {
        let s = StepSpec::from_json(
            r#"{"spec_version": 3, "workload": {"kind": "insert", "step": "l.x"},
                "clients": 1, "seed": 0,
                "engine": {"driver": "postgres", "socket_dir": "/tmp/x", "port": 5432,
                           "user": "u", "database": "d"}}"#,
        )
        .unwrap();
        assert!(matches!(s.engine, EngineSpec::Postgres { port: 5432, .. }));
        let bad = StepSpec::from_json(
            r#"{"spec_version": 3, "workload": {"kind": "insert", "step": "l.x"},
                "clients": 1, "seed": 0, "engine": {"driver": "null", "port": 1}}"#,
        );
        assert!(error_of(bad).contains("port"));
        let rocks = StepSpec::from_json(
            r#"{"spec_version": 3, "workload": {"kind": "insert", "step": "l.x"},
                "clients": 1, "seed": 0, "engine": {"driver": "rocksdb", "library": "l",
                "version": "8.0", "db_path": "d", "options": {}}}"#,
        );
        assert!(error_of(rocks).contains("driver rocksdb does not run workload insert"));
    }
}
