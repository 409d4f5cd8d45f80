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
    run_with_fault(spec, None)
}

/// `run` with DBREGRESS_LOADGEN_FAULT set to `fault` (unset when None).
pub fn run_with_fault(spec: &Value, fault: Option<&str>) -> Run {
    let mut cmd = Command::cargo_bin("dbregress-loadgen").unwrap();
    cmd.env_remove("DBREGRESS_LOADGEN_FAULT");
    if let Some(f) = fault {
        cmd.env("DBREGRESS_LOADGEN_FAULT", f);
    }
    let out = cmd
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
    events.iter().for_each(check_event);
    let stderr = String::from_utf8(out.stderr).unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        events,
        stderr,
    }
}

fn check_event(e: &Value) {
    let errors: Vec<String> = events_schema()
        .iter_errors(e)
        .map(|x| x.to_string())
        .collect();
    assert!(errors.is_empty(), "event {e} breaks the schema: {errors:?}");
}

/// A loadgen running on a spec file while the test holds its stdin (the handshake).
/// Every event must match the schema.
pub struct Session {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<Value>,
    spec_path: PathBuf,
    pub events: Vec<Value>,
}

impl Session {
    pub fn start(spec: &Value, name: &str) -> Session {
        use std::process::{Command, Stdio};
        let spec_path = std::env::temp_dir().join(format!("lg-{name}-{}.json", std::process::id()));
        std::fs::write(&spec_path, spec.to_string()).unwrap();
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("dbregress-loadgen"))
            .arg(&spec_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Session {
            child,
            stdin,
            lines,
            spec_path,
            events: Vec::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next event; None when the stream ended. Panics after a minute without one.
    pub fn next(&mut self) -> Option<Value> {
        use std::sync::mpsc::RecvTimeoutError;
        match self.lines.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(e) => {
                check_event(&e);
                self.events.push(e.clone());
                Some(e)
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!("no event for a minute: {:?}", self.events),
        }
    }

    /// Events up to the first of type `kind`, which is returned.
    pub fn until(&mut self, kind: &str) -> Value {
        loop {
            let e = self.next();
            let e = e.unwrap_or_else(|| panic!("no {kind} in {:?}", self.events));
            if e["type"] == kind {
                return e;
            }
        }
    }

    /// True if nothing is printed for `d`.
    pub fn quiet_for(&mut self, d: std::time::Duration) -> bool {
        match self.lines.recv_timeout(d) {
            Ok(e) => {
                self.events.push(e);
                false
            }
            Err(_) => true,
        }
    }

    pub fn say(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Close stdin, read the rest of the stream; the exit code.
    pub fn finish(&mut self) -> i32 {
        self.stdin.take();
        while self.next().is_some() {}
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.spec_path);
    }
}

/// A spec's `workload`: `fields` (an object: the workload's own fields) with its kind and
/// step.
pub fn workload(kind: &str, step: &str, fields: Value) -> Value {
    let mut w = fields;
    let obj = w
        .as_object_mut()
        .expect("the workload's fields are an object");
    obj.insert("kind".into(), kind.into());
    obj.insert("step".into(), step.into());
    w
}
