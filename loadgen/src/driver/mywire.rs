//! A minimal blocking client of the MySQL client/server protocol (MySQL 5.7/8.x,
//! MariaDB 10.2+), for the `mysql` driver's hot path: one write and usually one read
//! per statement, result rows counted, never decoded.
//!
//! Why not the `mysql` crate: as with `pgwire`, client CPU per query is what a load
//! generator must keep below the server's, and the comparison is sysbench's libmysql.
//! Only what the workloads need is here: login over a unix socket with an empty
//! password (mysql_native_password, caching_sha2_password, unix_socket, or no auth at
//! all under skip-grant-tables), COM_QUERY for DDL and counts, and prepared
//! statements (COM_STMT_PREPARE/EXECUTE) with binary parameters. CLIENT_DEPRECATE_EOF
//! is used when the server offers it.
//!
//! Nothing the server sends can make this client panic: a malformed, truncated or
//! hostile reply is an error saying what was wrong with it (property tests in
//! `mywire/props.rs`).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::mypacket::{
    excerpt, parse_column_count, parse_err, parse_greeting, parse_ok, parse_prepare_ok,
    parse_text_row,
};
pub use super::mypacket::{MyError, MyResult, Outcome, Params};

const CLIENT_LONG_PASSWORD: u32 = 1;
const CLIENT_FOUND_ROWS: u32 = 2; // UPDATE reports matched rows, as PostgreSQL does
const CLIENT_LONG_FLAG: u32 = 4;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_TRANSACTIONS: u32 = 0x2000;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_MULTI_STATEMENTS: u32 = 0x1_0000;
const CLIENT_MULTI_RESULTS: u32 = 0x2_0000;
const CLIENT_PS_MULTI_RESULTS: u32 = 0x4_0000;
const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;
const CLIENT_PLUGIN_AUTH_LENENC: u32 = 0x20_0000;
const CLIENT_DEPRECATE_EOF: u32 = 0x100_0000;

const WANTED: u32 = CLIENT_LONG_PASSWORD
    | CLIENT_FOUND_ROWS
    | CLIENT_LONG_FLAG
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
    | CLIENT_PLUGIN_AUTH_LENENC
    | CLIENT_DEPRECATE_EOF;

const SERVER_MORE_RESULTS_EXISTS: u16 = 8;
const UTF8MB4_GENERAL_CI: u8 = 45;
const MAX_PAYLOAD: usize = 0xff_ffff;

const COM_QUIT: u8 = 0x01;
const COM_INIT_DB: u8 = 0x02;
const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;

/// A prepared statement on one connection.
#[derive(Debug, Clone, Copy)]
pub struct Prepared {
    id: u32,
    params: u16,
}

pub struct MyClient {
    stream: UnixStream,
    caps: u32,
    seq: u8,
    wbuf: Vec<u8>,
    rbuf: Vec<u8>,
    rpos: usize,
    rlen: usize,
    /// Reassembles a payload split over several packets.
    big: Vec<u8>,
    params: Params,
    pub server_version: String,
    /// How long a read waits for the server: the connect timeout, then no limit.
    wait_ms: i32,
}

impl MyClient {
    /// Connect to the socket and log in as `user` with an empty password.
    pub fn connect(socket: &Path, user: &str, timeout: Duration) -> MyResult<MyClient> {
        let stream =
            UnixStream::connect(socket).map_err(|e| MyError::client(format!("connect: {e}")))?;
        MyClient::start(stream, user, timeout)
    }

    /// Log in on a connected stream, each read waiting at most `timeout`.
    fn start(stream: UnixStream, user: &str, timeout: Duration) -> MyResult<MyClient> {
        let io = |e: std::io::Error| MyError::client(format!("connect: {e}"));
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        let mut c = MyClient {
            stream,
            caps: 0,
            seq: 0,
            wbuf: Vec::with_capacity(256),
            rbuf: vec![0; 64 * 1024],
            rpos: 0,
            rlen: 0,
            big: Vec::new(),
            params: Params::default(),
            server_version: String::new(),
            wait_ms: timeout.as_millis().min(i32::MAX as u128) as i32,
        };
        c.handshake(user)?;
        c.stream.set_read_timeout(None).map_err(io)?;
        c.wait_ms = -1;
        Ok(c)
    }

    fn handshake(&mut self, user: &str) -> MyResult<()> {
        let greeting = parse_greeting(self.read_packet()?)?;
        self.server_version = greeting.server_version;
        if greeting.caps & CLIENT_PROTOCOL_41 == 0 {
            return Err(MyError::client("the server lacks protocol 4.1"));
        }
        self.caps = WANTED & greeting.caps;
        let plugin = greeting.plugin;
        let mut p = Vec::new();
        p.extend_from_slice(&self.caps.to_le_bytes());
        p.extend_from_slice(&(MAX_PAYLOAD as u32).to_le_bytes());
        p.push(UTF8MB4_GENERAL_CI);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(0); // empty auth response (lenenc or one-byte length: both 0)
        if self.caps & CLIENT_PLUGIN_AUTH != 0 {
            p.extend_from_slice(plugin.as_bytes());
            p.push(0);
        }
        self.seq = 1;
        self.write_packet(&p)?;
        self.finish_auth()
    }

    /// Answer the server's auth requests with an empty password until OK or ERR.
    fn finish_auth(&mut self) -> MyResult<()> {
        loop {
            let p = self.read_packet()?;
            match p.first() {
                Some(0x00) => return Ok(()),
                Some(0xff) => return Err(parse_err(p)),
                // AuthSwitchRequest: any plugin gets the empty password's answer.
                Some(0xfe) => self.write_packet(&[])?,
                // caching_sha2_password: 3 = fast auth done (OK follows); 4 = full
                // auth, where a unix socket may carry the password in clear.
                Some(0x01) if p.get(1) == Some(&3) => {}
                Some(0x01) if p.get(1) == Some(&4) => self.write_packet(&[0])?,
                _ => {
                    return Err(MyError::client(format!(
                        "unexpected packet during login ({})",
                        excerpt(p)
                    )))
                }
            }
        }
    }

    fn write_packet(&mut self, payload: &[u8]) -> MyResult<()> {
        self.wbuf.clear();
        let mut chunks = payload.chunks(MAX_PAYLOAD).peekable();
        if chunks.peek().is_none() {
            self.push_header(0);
        }
        let mut last = 0;
        for chunk in chunks {
            self.push_header(chunk.len());
            self.wbuf.extend_from_slice(chunk);
            last = chunk.len();
        }
        if last == MAX_PAYLOAD {
            self.push_header(0);
        }
        self.flush()
    }

    fn push_header(&mut self, len: usize) {
        self.wbuf
            .extend_from_slice(&(len as u32).to_le_bytes()[..3]);
        self.wbuf.push(self.seq);
        self.seq = self.seq.wrapping_add(1);
    }

    fn flush(&mut self) -> MyResult<()> {
        self.stream
            .write_all(&self.wbuf)
            .map_err(|e| MyError::client(format!("error sending to the server: {e}")))
    }

    /// Start a command: `wbuf` holds its header and command byte; `finish_command` sets
    /// the length once the body is appended.
    fn begin_command(&mut self, cmd: u8) {
        self.wbuf.clear();
        self.wbuf.extend_from_slice(&[0, 0, 0, 0, cmd]);
        self.seq = 1;
    }

    fn send_command(&mut self) -> MyResult<()> {
        let len = self.wbuf.len() - 4;
        if len >= MAX_PAYLOAD {
            let payload = self.wbuf.split_off(4);
            self.seq = 0;
            return self.write_packet(&payload);
        }
        self.wbuf[..3].copy_from_slice(&(len as u32).to_le_bytes()[..3]);
        self.flush()
    }

    fn fill(&mut self) -> MyResult<()> {
        if self.rpos > 0 {
            self.rbuf.copy_within(self.rpos..self.rlen, 0);
            self.rlen -= self.rpos;
            self.rpos = 0;
        }
        if self.rlen == self.rbuf.len() {
            self.rbuf.resize(self.rbuf.len() * 2, 0);
        }
        loop {
            let ready = super::sockwait::readable(&self.stream, self.wait_ms);
            return match ready.and_then(|_| self.stream.read(&mut self.rbuf[self.rlen..])) {
                Ok(0) => Err(MyError::client("the server closed the connection")),
                Ok(n) => {
                    self.rlen += n;
                    Ok(())
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    Err(MyError::client(
                        "the server did not answer within the connect timeout",
                    ))
                }
                Err(e) => Err(MyError::client(format!(
                    "error reading from the server: {e}"
                ))),
            };
        }
    }

    /// The next packet's payload (reassembled when the server split it).
    fn read_packet(&mut self) -> MyResult<&[u8]> {
        self.big.clear();
        loop {
            while self.rlen - self.rpos < 4 {
                self.fill()?;
            }
            let h = &self.rbuf[self.rpos..self.rpos + 4];
            let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
            self.seq = h[3].wrapping_add(1);
            while self.rlen - self.rpos < 4 + len {
                self.fill()?;
            }
            let start = self.rpos + 4;
            self.rpos = start + len;
            if len < MAX_PAYLOAD && self.big.is_empty() {
                return Ok(&self.rbuf[start..start + len]);
            }
            let (b, e) = (start, start + len);
            self.big.extend_from_slice(&self.rbuf[b..e]);
            if len < MAX_PAYLOAD {
                return Ok(&self.big);
            }
        }
    }

    /// Read a statement's response: an OK packet or a whole result set (rows counted).
    fn read_response(&mut self) -> MyResult<Outcome> {
        let mut total = Outcome::default();
        loop {
            let p = self.read_packet()?;
            let more = match p.first() {
                Some(0x00) => {
                    let (o, status) = parse_ok(p)?;
                    total.rows += o.rows;
                    total.last_insert_id = o.last_insert_id;
                    status & SERVER_MORE_RESULTS_EXISTS != 0
                }
                Some(0xff) => {
                    let e = parse_err(p);
                    return Err(e);
                }
                Some(0xfb) => return Err(MyError::client("LOCAL INFILE is not supported")),
                _ => {
                    let columns = parse_column_count(p)?;
                    let (rows, status) = self.read_result_set(columns)?;
                    total.rows += rows;
                    status & SERVER_MORE_RESULTS_EXISTS != 0
                }
            };
            if !more {
                return Ok(total);
            }
        }
    }

    /// Skip the column definitions, count the rows; returns them and the final status.
    fn read_result_set(&mut self, columns: u64) -> MyResult<(u64, u16)> {
        for _ in 0..columns {
            self.read_packet()?;
        }
        if self.caps & CLIENT_DEPRECATE_EOF == 0 {
            self.read_packet()?;
        }
        let mut rows = 0;
        let deprecate_eof = self.caps & CLIENT_DEPRECATE_EOF != 0;
        loop {
            let p = self.read_packet()?;
            match p.first() {
                Some(0xfe) if p.len() < MAX_PAYLOAD => {
                    let status = if deprecate_eof {
                        parse_ok(p)?.1
                    } else {
                        match p.get(3..5) {
                            Some(&[s0, s1]) => u16::from_le_bytes([s0, s1]),
                            _ => 0,
                        }
                    };
                    return Ok((rows, status));
                }
                Some(0xff) => return Err(parse_err(p)),
                _ => rows += 1,
            }
        }
    }

    /// Run SQL as a text query; returns rows returned or affected.
    pub fn query(&mut self, sql: &str) -> MyResult<Outcome> {
        self.begin_command(COM_QUERY);
        self.wbuf.extend_from_slice(sql.as_bytes());
        self.send_command()?;
        self.read_response()
    }

    /// Run SQL as a text query; returns its rows as text (NULL as None).
    pub fn query_rows(&mut self, sql: &str) -> MyResult<Vec<Vec<Option<String>>>> {
        self.begin_command(COM_QUERY);
        self.wbuf.extend_from_slice(sql.as_bytes());
        self.send_command()?;
        let p = self.read_packet()?;
        match p.first() {
            Some(0x00) => return Ok(Vec::new()),
            Some(0xff) => return Err(parse_err(p)),
            _ => {}
        }
        let columns = parse_column_count(p)?;
        for _ in 0..columns {
            self.read_packet()?;
        }
        if self.caps & CLIENT_DEPRECATE_EOF == 0 {
            self.read_packet()?;
        }
        let mut rows = Vec::new();
        loop {
            let p = self.read_packet()?;
            match p.first() {
                Some(0xfe) if p.len() < MAX_PAYLOAD => return Ok(rows),
                Some(0xff) => return Err(parse_err(p)),
                _ => rows.push(parse_text_row(p, columns.try_into().unwrap_or(usize::MAX))?),
            }
        }
    }

    pub fn init_db(&mut self, db: &str) -> MyResult<()> {
        self.begin_command(COM_INIT_DB);
        self.wbuf.extend_from_slice(db.as_bytes());
        self.send_command()?;
        self.read_response().map(|_| ())
    }

    pub fn prepare(&mut self, sql: &str) -> MyResult<Prepared> {
        self.begin_command(COM_STMT_PREPARE);
        self.wbuf.extend_from_slice(sql.as_bytes());
        self.send_command()?;
        let (id, columns, params) = parse_prepare_ok(self.read_packet()?)?;
        for n in [params, columns] {
            if n > 0 {
                for _ in 0..n {
                    self.read_packet()?;
                }
                if self.caps & CLIENT_DEPRECATE_EOF == 0 {
                    self.read_packet()?;
                }
            }
        }
        Ok(Prepared { id, params })
    }

    /// Execute a prepared statement with the parameters `f` writes.
    pub fn execute(&mut self, stmt: Prepared, f: impl FnOnce(&mut Params)) -> MyResult<Outcome> {
        self.params.types.clear();
        self.params.values.clear();
        f(&mut self.params);
        let n = stmt.params as usize;
        if self.params.types.len() != 2 * n {
            return Err(MyError::client(format!(
                "the statement takes {n} parameters, {} given",
                self.params.types.len() / 2
            )));
        }
        self.begin_command(COM_STMT_EXECUTE);
        self.wbuf.extend_from_slice(&stmt.id.to_le_bytes());
        self.wbuf.push(0); // no cursor
        self.wbuf.extend_from_slice(&1u32.to_le_bytes());
        if n > 0 {
            self.wbuf.resize(self.wbuf.len() + n.div_ceil(8), 0); // no NULLs
            self.wbuf.push(1); // types follow
            self.wbuf.extend_from_slice(&self.params.types);
            self.wbuf.extend_from_slice(&self.params.values);
        }
        self.send_command()?;
        self.read_response()
    }
}

impl Drop for MyClient {
    fn drop(&mut self) {
        self.begin_command(COM_QUIT);
        let _ = self.send_command();
    }
}

#[cfg(test)]
mod props;
