//! Running the built binary on a spec and checking every line against the schema.

#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

pub fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schema")
}

pub fn validator(name: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(schema_dir().join(name)).unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

pub fn events_schema() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| validator("events.schema.json"))
}

pub fn spec_schema() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| validator("step-spec.schema.json"))
}

pub struct Run {
    pub code: i32,
    pub events: Vec<Value>,
    pub stderr: String,
}

impl Run {
    pub fn summary(&self) -> &Value {
        let last = self.events.last().expect("some output");
        assert_eq!(
            last["type"], "summary",
            "last event: {last}\nstderr: {}",
            self.stderr
        );
        last
    }

    pub fn fatal(&self) -> &str {
        let last = self.events.last().expect("some output");
        assert_eq!(last["type"], "fatal", "last event: {last}");
        assert_eq!(self.code, 1);
        last["message"].as_str().unwrap()
    }

    /// Sum over the interval lines of one op kind's ops.
    pub fn interval_ops(&self, kind: &str) -> u64 {
        self.events
            .iter()
            .filter(|e| e["type"] == "interval")
            .map(|e| e["ops"][kind]["ops"].as_u64().unwrap_or(0))
            .sum()
    }
}

/// Run the loadgen on a spec given on stdin; every output line must match the schema.
pub fn run(spec: &Value) -> Run {
    let out = Command::cargo_bin("dbregress-loadgen")
        .unwrap()
        .arg("-")
        .write_stdin(spec.to_string())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for e in &events {
        let errors: Vec<String> = events_schema()
            .iter_errors(e)
            .map(|x| x.to_string())
            .collect();
        assert!(errors.is_empty(), "event {e} breaks the schema: {errors:?}");
    }
    let stderr = String::from_utf8(out.stderr).unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        events,
        stderr,
    }
}
