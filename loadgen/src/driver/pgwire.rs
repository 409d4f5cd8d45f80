//! A minimal blocking client of the PostgreSQL frontend/backend protocol 3.0, for the
//! `postgres` driver's hot path: one write and usually one read per statement.
//!
//! Why not the `postgres` crate: it drives tokio under the hood, costing about three
//! epoll_wait calls per query on top of send and recv; measured on this project's 2-vCPU
//! machines that was 11 us of client CPU per point query with the server on the same CPU
//! and 35 us across CPUs. Only what the workloads need is here: trust authentication over
//! a unix socket, the simple query protocol for DDL and counts, and named prepared
//! statements with binary parameters whose result rows are counted, never decoded.
//!
//! Nothing the server sends can make this client panic: a malformed, truncated or
//! hostile reply is an error saying what was wrong with it (property tests in
//! `pgwire/props.rs`).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Type OIDs of the parameters the workloads send.
pub const INT4: u32 = 23;
pub const INT8: u32 = 20;
pub const VARCHAR: u32 = 1043;
pub const TIMESTAMP: u32 = 1114;

/// Seconds from the Unix epoch to PostgreSQL's, 2000-01-01.
const PG_EPOCH_UNIX_S: u64 = 946_684_800;

#[derive(Debug, Clone)]
pub struct PgError {
    /// SQLSTATE from an ErrorResponse; None for I/O and protocol errors.
    pub code: Option<String>,
    pub message: String,
}

impl PgError {
    fn client(message: impl Into<String>) -> PgError {
        PgError {
            code: None,
            message: message.into(),
        }
    }

    fn io(what: &str, e: std::io::Error) -> PgError {
        PgError::client(format!("{what}: {e}"))
    }
}

pub type PgResult<T> = Result<T, PgError>;

/// Appends one statement's parameters in binary format.
pub struct Params<'a> {
    buf: &'a mut Vec<u8>,
}

impl Params<'_> {
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&4i32.to_be_bytes());
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&8i32.to_be_bytes());
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn str(&mut self, v: &str) {
        self.buf.extend_from_slice(&(v.len() as i32).to_be_bytes());
        self.buf.extend_from_slice(v.as_bytes());
    }

    /// A `timestamp` (without time zone) holding the UTC time.
    pub fn timestamp(&mut self, t: SystemTime) {
        let unix_us = t
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        self.i64(unix_us - (PG_EPOCH_UNIX_S * 1_000_000) as i64);
    }
}

pub struct PgClient {
    stream: UnixStream,
    wbuf: Vec<u8>,
    rbuf: Vec<u8>,
    /// Unread bytes of `rbuf` are `rpos..rlen`.
    rpos: usize,
    rlen: usize,
    /// How long a read waits for the server: the connect timeout, then no limit.
    wait_ms: i32,
    /// The first column of the last row `execute_returning` read, reused.
    last: Vec<u8>,
    /// The server process serving this session (BackendKeyData), if it said.
    backend_pid: Option<u32>,
}

/// Start a message of type `tag` in `buf`; `finish` fills in its length.
fn begin(buf: &mut Vec<u8>, tag: u8) -> usize {
    buf.push(tag);
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    at
}

fn finish(buf: &mut [u8], at: usize) {
    let len = (buf.len() - at) as i32;
    buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

fn cstr(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(s.as_bytes());
    buf.push(0);
}

/// A message's type byte as the protocol documents it: a letter, else its value.
fn show_tag(tag: u8) -> String {
    if tag.is_ascii_graphic() {
        format!("'{}'", tag as char)
    } else {
        format!("0x{tag:02x}")
    }
}

/// The header of the message at the start of `buf`: its type and its whole length,
/// the type byte included; None until the 5 header bytes are in.
fn header(buf: &[u8]) -> PgResult<Option<(u8, usize)>> {
    let Some((&[tag, a, b, c, d], _)) = buf.split_first_chunk::<5>() else {
        return Ok(None);
    };
    let len = i32::from_be_bytes([a, b, c, d]);
    match usize::try_from(len) {
        Ok(n) if n >= 4 => Ok(Some((tag, 1 + n))),
        _ => Err(PgError::client(format!(
            "malformed message from the server: type {} with length {len}, less than \
             the 4 bytes of the length itself",
            show_tag(tag)
        ))),
    }
}

/// Severity, SQLSTATE and message of an ErrorResponse body.
fn parse_error(body: &[u8]) -> PgError {
    let (mut severity, mut code, mut message) = ("ERROR", None, "");
    for field in body.split(|&b| b == 0) {
        let (Some(&kind), Some(value)) = (field.first(), field.get(1..)) else {
            continue;
        };
        let value = std::str::from_utf8(value).unwrap_or("?");
        match kind {
            b'V' => severity = value,
            b'C' => code = Some(value.to_string()),
            b'M' => message = value,
            _ => {}
        }
    }
    let text = format!("{severity} {}: {message}", code.as_deref().unwrap_or("?"));
    PgError {
        code,
        message: text,
    }
}

/// Rows a command reports in its tag: "SELECT 10", "DELETE 5", "INSERT 0 100".
fn tag_rows(body: &[u8]) -> u64 {
    let tag = body.strip_suffix(&[0]).unwrap_or(body);
    let last = tag.rsplit(|&b| b == b' ').next().unwrap_or(b"");
    std::str::from_utf8(last)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

impl PgClient {
    /// Connect to the socket file and log in with trust authentication.
    pub fn connect(
        socket: &Path,
        user: &str,
        database: &str,
        timeout: Duration,
    ) -> PgResult<PgClient> {
        let stream = UnixStream::connect(socket).map_err(|e| PgError::io("connect", e))?;
        PgClient::start(stream, user, database, timeout)
    }

    /// Log in on a connected stream, each read waiting at most `timeout`.
    fn start(
        stream: UnixStream,
        user: &str,
        database: &str,
        timeout: Duration,
    ) -> PgResult<PgClient> {
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| PgError::io("connect", e))?;
        let mut c = PgClient {
            stream,
            wbuf: Vec::new(),
            rbuf: vec![0; 64 * 1024],
            rpos: 0,
            rlen: 0,
            wait_ms: timeout.as_millis().min(i32::MAX as u128) as i32,
            last: Vec::new(),
            backend_pid: None,
        };
        c.wbuf.extend_from_slice(&[0; 4]);
        c.wbuf.extend_from_slice(&196608i32.to_be_bytes()); // protocol 3.0
        for (k, v) in [
            ("user", user),
            ("database", database),
            ("application_name", "dbregress-loadgen"),
        ] {
            cstr(&mut c.wbuf, k);
            cstr(&mut c.wbuf, v);
        }
        c.wbuf.push(0);
        finish(&mut c.wbuf, 0);
        c.flush()?;
        let mut backend_pid = None;
        c.read_until_ready(|tag, body| match tag {
            b'R' if body.get(..4) != Some(&[0, 0, 0, 0]) => Err(PgError::client(
                "the server asks for a password; the loadgen expects trust authentication",
            )),
            b'K' => {
                backend_pid = body
                    .get(..4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                Ok(())
            }
            _ => Ok(()),
        })?;
        c.backend_pid = backend_pid;
        c.stream
            .set_read_timeout(None)
            .map_err(|e| PgError::io("connect", e))?;
        c.wait_ms = -1;
        Ok(c)
    }

    /// The pid of the server process serving this session, from BackendKeyData.
    pub fn backend_pid(&self) -> Option<u32> {
        self.backend_pid
    }

    fn flush(&mut self) -> PgResult<()> {
        let r = self.stream.write_all(&self.wbuf);
        self.wbuf.clear();
        r.map_err(|e| PgError::io("error sending to the server", e))
    }

    /// The next message (type, body) from the server.
    fn next_message(&mut self) -> PgResult<(u8, &[u8])> {
        loop {
            let avail = self.rbuf.get(self.rpos..self.rlen).unwrap_or_default();
            let mut need = 5;
            if let Some((tag, total)) = header(avail)? {
                if avail.len() >= total {
                    let start = self.rpos + 5;
                    self.rpos += total;
                    return Ok((tag, self.rbuf.get(start..self.rpos).unwrap_or_default()));
                }
                need = total;
            }
            if self.rpos > 0 {
                self.rbuf.copy_within(self.rpos..self.rlen, 0);
                self.rlen -= self.rpos;
                self.rpos = 0;
            }
            if self.rlen == self.rbuf.len() {
                // Grow with what arrives, not with what a header claims.
                let grown = (self.rbuf.len() * 2).max(64).min(need);
                self.rbuf.resize(grown, 0);
            }
            let ready = super::sockwait::readable(&self.stream, self.wait_ms);
            let n = match ready.and_then(|_| self.stream.read(&mut self.rbuf[self.rlen..])) {
                Ok(0) => return Err(PgError::client("the server closed the connection")),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(PgError::client(
                        "the server did not answer within the connect timeout",
                    ));
                }
                Err(e) => return Err(PgError::io("error reading from the server", e)),
            };
            self.rlen += n;
        }
    }

    /// Read messages through ReadyForQuery, handing each to `f` (its error ends the
    /// read at once); the first ErrorResponse becomes the result once the server is
    /// ready again.
    fn read_until_ready(&mut self, mut f: impl FnMut(u8, &[u8]) -> PgResult<()>) -> PgResult<()> {
        let mut error = None;
        loop {
            let (tag, body) = self.next_message()?;
            match tag {
                b'Z' => return error.map_or(Ok(()), Err),
                b'E' => {
                    let e = parse_error(body);
                    if e.message.starts_with("FATAL") || e.message.starts_with("PANIC") {
                        return Err(e); // the server closes the session after these
                    }
                    error.get_or_insert(e);
                }
                _ => f(tag, body)?,
            }
        }
    }

    /// Run SQL with the simple query protocol; returns the rows as text.
    pub fn simple_query(&mut self, sql: &str) -> PgResult<Vec<Vec<Option<String>>>> {
        let at = begin(&mut self.wbuf, b'Q');
        cstr(&mut self.wbuf, sql);
        finish(&mut self.wbuf, at);
        self.flush()?;
        let mut rows = Vec::new();
        self.read_until_ready(|tag, body| {
            if tag == b'D' {
                rows.push(parse_text_row(body)?);
            }
            Ok(())
        })?;
        Ok(rows)
    }

    /// Prepare `sql` as the named statement with these parameter types.
    pub fn prepare(&mut self, name: &str, sql: &str, types: &[u32]) -> PgResult<()> {
        let at = begin(&mut self.wbuf, b'P');
        cstr(&mut self.wbuf, name);
        cstr(&mut self.wbuf, sql);
        self.wbuf
            .extend_from_slice(&(types.len() as i16).to_be_bytes());
        for t in types {
            self.wbuf.extend_from_slice(&t.to_be_bytes());
        }
        finish(&mut self.wbuf, at);
        self.sync_and_read().map(|_| ())
    }

    /// Execute a prepared statement with `nparams` binary parameters written by
    /// `params`; returns the rows the command reports (returned, inserted or deleted).
    pub fn execute(
        &mut self,
        name: &str,
        nparams: usize,
        params: impl FnOnce(&mut Params),
    ) -> PgResult<u64> {
        self.bind_execute(name, nparams, params);
        self.sync_and_read()
    }

    /// Buffer Bind and Execute of the unnamed portal for a prepared statement.
    fn bind_execute(&mut self, name: &str, nparams: usize, params: impl FnOnce(&mut Params)) {
        let at = begin(&mut self.wbuf, b'B');
        self.wbuf.push(0); // unnamed portal
        cstr(&mut self.wbuf, name);
        self.wbuf.extend_from_slice(&1i16.to_be_bytes()); // one format code for all: binary
        self.wbuf.extend_from_slice(&1i16.to_be_bytes());
        self.wbuf.extend_from_slice(&(nparams as i16).to_be_bytes());
        params(&mut Params {
            buf: &mut self.wbuf,
        });
        self.wbuf.extend_from_slice(&0i16.to_be_bytes()); // results in text, never decoded
        finish(&mut self.wbuf, at);
        let at = begin(&mut self.wbuf, b'E');
        self.wbuf.push(0);
        self.wbuf.extend_from_slice(&0i32.to_be_bytes());
        finish(&mut self.wbuf, at);
    }

    /// Like `execute`, also returning the first column of the last result row as text
    /// (None when there is no row, or it is NULL), in a buffer the client reuses.
    pub fn execute_returning(
        &mut self,
        name: &str,
        nparams: usize,
        params: impl FnOnce(&mut Params),
    ) -> PgResult<(u64, Option<&[u8]>)> {
        self.bind_execute(name, nparams, params);
        self.sync_and_read_last()
    }

    /// Send Sync with what is buffered, read through ReadyForQuery; rows from the tag.
    fn sync_and_read(&mut self) -> PgResult<u64> {
        let at = begin(&mut self.wbuf, b'S');
        finish(&mut self.wbuf, at);
        self.flush()?;
        let mut rows = 0;
        self.read_until_ready(|tag, body| {
            if tag == b'C' {
                rows = tag_rows(body);
            }
            Ok(())
        })?;
        Ok(rows)
    }

    /// An INSERT ... RETURNING sends a DataRow per row: each is checked whole, and only
    /// the first column of the last one is kept, copied into `last`; nothing allocated.
    fn sync_and_read_last(&mut self) -> PgResult<(u64, Option<&[u8]>)> {
        let at = begin(&mut self.wbuf, b'S');
        finish(&mut self.wbuf, at);
        self.flush()?;
        let (mut rows, mut has_last) = (0, false);
        let mut last = std::mem::take(&mut self.last);
        let r = self.read_until_ready(|tag, body| {
            match tag {
                b'C' => rows = tag_rows(body),
                b'D' => {
                    has_last = false;
                    walk_text_row(body, |i, v| {
                        if let (0, Some(v)) = (i, v) {
                            last.clear();
                            last.extend_from_slice(v);
                            has_last = true;
                        }
                    })?;
                }
                _ => {}
            }
            Ok(())
        });
        self.last = last;
        r?;
        Ok((rows, has_last.then_some(&self.last[..])))
    }
}

/// The columns of a DataRow body as text, NULL as None.
fn parse_text_row(body: &[u8]) -> PgResult<Vec<Option<String>>> {
    let mut row = Vec::new();
    walk_text_row(body, |_, v| {
        row.push(v.map(|v| String::from_utf8_lossy(v).into_owned()))
    })?;
    Ok(row)
}

/// Hand each column of a DataRow body (its index, its bytes, NULL as None) to `f`,
/// checking the whole row's framing.
fn walk_text_row<'a>(body: &'a [u8], mut f: impl FnMut(usize, Option<&'a [u8]>)) -> PgResult<()> {
    let bad = |what: String| PgError::client(format!("malformed DataRow from the server: {what}"));
    let Some((&count, mut rest)) = body.split_first_chunk::<2>() else {
        return Err(bad(format!(
            "{} bytes, too short for a column count",
            body.len()
        )));
    };
    let n = i16::from_be_bytes(count);
    let n = usize::try_from(n).map_err(|_| bad(format!("column count {n}")))?;
    for i in 1..=n {
        let Some((&len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(bad(format!("column {i} of {n} is missing")));
        };
        rest = tail;
        let value = match i32::from_be_bytes(len) {
            -1 => None,
            len => {
                let (v, tail) = usize::try_from(len)
                    .ok()
                    .and_then(|len| rest.split_at_checked(len))
                    .ok_or_else(|| {
                        bad(format!(
                            "column {i} of {n} claims {len} bytes, {} remain",
                            rest.len()
                        ))
                    })?;
                rest = tail;
                Some(v)
            }
        };
        f(i - 1, value);
    }
    Ok(())
}

impl Drop for PgClient {
    fn drop(&mut self) {
        let at = begin(&mut self.wbuf, b'X');
        finish(&mut self.wbuf, at);
        let _ = self.flush();
    }
}

#[cfg(test)]
mod props;
