//! The caller's side of a step on stdin: the handshake's lines (`go`, `check`), then
//! stdin's end (wait_before_close). A thread of its own reads them, so waiting for one
//! can still notice a signal or a client's failure.

use anyhow::Result;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// How often waiting threads look at signals, messages and the stop flag.
pub const POLL: Duration = Duration::from_millis(50);

/// SIGINT or SIGTERM arrived.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

pub struct Control {
    /// Lines as read, trimmed; the channel closes when stdin does.
    rx: Receiver<String>,
}

pub enum Heard {
    Line(String),
    Nothing,
    Closed,
}

impl Control {
    /// Start reading stdin.
    pub fn listen() -> Control {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line.trim().to_string()).is_err() {
                    break;
                }
            }
        });
        Control { rx }
    }

    /// The next line within `wait`, or that there was none, or that stdin closed.
    pub fn hear(&self, wait: Duration) -> Heard {
        match self.rx.recv_timeout(wait) {
            Ok(line) => Heard::Line(line),
            Err(RecvTimeoutError::Timeout) => Heard::Nothing,
            Err(RecvTimeoutError::Disconnected) => Heard::Closed,
        }
    }

    /// Wait until stdin closes, ignoring what it says; a signal ends the wait.
    pub fn wait_closed(&self, interrupted: &AtomicBool) -> Result<()> {
        loop {
            if interrupted.load(Relaxed) {
                return Err(Interrupted.into());
            }
            if let Heard::Closed = self.hear(POLL) {
                return Ok(());
            }
        }
    }
}
