//! Encoding and decoding of MySQL protocol packets for `mywire`: length-encoded
//! integers, the greeting, OK/ERR packets, binary statement parameters, text rows.
//! Decoding never panics: a malformed packet is an error naming what was wrong
//! (property tests in `mywire/props.rs`).

use std::time::{SystemTime, UNIX_EPOCH};

const TYPE_LONGLONG: u8 = 0x08;
const TYPE_DATETIME: u8 = 0x0c;
const TYPE_VAR_STRING: u8 = 0xfd;

#[derive(Debug, Clone)]
pub struct MyError {
    /// The server's error number; None for I/O and protocol errors.
    pub code: Option<u16>,
    pub message: String,
}

impl MyError {
    pub fn client(message: impl Into<String>) -> MyError {
        MyError {
            code: None,
            message: message.into(),
        }
    }
}

pub type MyResult<T> = Result<T, MyError>;

/// A packet's length and first bytes, for an error about it.
pub fn excerpt(p: &[u8]) -> String {
    let shown: Vec<String> = p.iter().take(16).map(|b| format!("{b:02x}")).collect();
    let more = if p.len() > 16 { " ..." } else { "" };
    format!("{} bytes: {}{more}", p.len(), shown.join(" "))
}

fn malformed(what: &str, p: &[u8]) -> MyError {
    MyError::client(format!("malformed {what} from the server ({})", excerpt(p)))
}

/// What the loadgen needs of the server's greeting (protocol 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    pub server_version: String,
    pub caps: u32,
    /// The auth plugin it names; empty when it names none.
    pub plugin: String,
}

pub fn parse_greeting(g: &[u8]) -> MyResult<Greeting> {
    match g.first() {
        Some(0xff) => return Err(parse_err(g)),
        Some(10) => {}
        _ => return Err(MyError::client("not a MySQL protocol 10 server")),
    }
    let body = g.get(1..).unwrap_or_default();
    let Some(nul) = body.iter().position(|&b| b == 0) else {
        return Err(malformed("greeting (no end to the server version)", g));
    };
    let (version, rest) = body.split_at(nul);
    let rest = rest.get(1..).unwrap_or_default();
    // connection id (4), scramble part 1 (8), filler (1), caps low (2), charset (1),
    // status (2), caps high (2), scramble length (1), reserved (10), scramble part 2.
    let Some(&[lo0, lo1]) = rest.get(13..15) else {
        return Err(malformed(
            "greeting (too short for its capability flags)",
            g,
        ));
    };
    let low = u16::from_le_bytes([lo0, lo1]) as u32;
    let high = match rest.get(18..20) {
        Some(&[h0, h1]) => u16::from_le_bytes([h0, h1]) as u32,
        _ => 0,
    };
    // The plugin name follows the scramble's second part, max(13, length - 8) bytes.
    let part2 = rest
        .get(20)
        .map_or(13, |&n| (n as usize).saturating_sub(8).max(13));
    let plugin = rest
        .get(31 + part2..)
        .and_then(|t| t.get(..t.iter().position(|&b| b == 0)?))
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default();
    Ok(Greeting {
        server_version: String::from_utf8_lossy(version).into_owned(),
        caps: low | (high << 16),
        plugin,
    })
}

/// Statement id, column count and parameter count of a COM_STMT_PREPARE OK packet.
pub fn parse_prepare_ok(p: &[u8]) -> MyResult<(u32, u16, u16)> {
    match p {
        [0x00, i0, i1, i2, i3, c0, c1, n0, n1, _, _, _, ..] => Ok((
            u32::from_le_bytes([*i0, *i1, *i2, *i3]),
            u16::from_le_bytes([*c0, *c1]),
            u16::from_le_bytes([*n0, *n1]),
        )),
        [0xff, ..] => Err(parse_err(p)),
        _ => Err(malformed("answer to a prepare", p)),
    }
}

/// What a statement did: rows returned (result set) or affected (OK packet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    pub rows: u64,
    pub last_insert_id: u64,
}

/// Appends one statement's binary parameters: the types, then the values.
#[derive(Default)]
pub struct Params {
    pub types: Vec<u8>,
    pub values: Vec<u8>,
}

impl Params {
    pub fn i64(&mut self, v: i64) {
        self.types.extend_from_slice(&[TYPE_LONGLONG, 0]);
        self.values.extend_from_slice(&v.to_le_bytes());
    }

    pub fn str(&mut self, v: &str) {
        self.types.extend_from_slice(&[TYPE_VAR_STRING, 0]);
        lenenc(&mut self.values, v.len() as u64);
        self.values.extend_from_slice(v.as_bytes());
    }

    /// A DATETIME holding the UTC time, to the second.
    pub fn datetime(&mut self, t: SystemTime) {
        let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
        let s = secs % 86_400;
        self.types.extend_from_slice(&[TYPE_DATETIME, 0]);
        self.values.push(7);
        self.values.extend_from_slice(&(y as u16).to_le_bytes());
        let (h, mi, sec) = (s / 3600, s / 60 % 60, s % 60);
        self.values
            .extend_from_slice(&[mo as u8, d as u8, h as u8, mi as u8, sec as u8]);
    }
}

/// Year, month, day of a day count from 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

pub fn lenenc(buf: &mut Vec<u8>, v: u64) {
    match v {
        0..=250 => buf.push(v as u8),
        251..=0xffff => {
            buf.push(0xfc);
            buf.extend_from_slice(&(v as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            buf.push(0xfd);
            buf.extend_from_slice(&v.to_le_bytes()[..3]);
        }
        _ => {
            buf.push(0xfe);
            buf.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// A length-encoded integer at the start of `b`, and the bytes it took; None when `b`
/// is empty, truncated, or starts with a byte no integer starts with (0xfb, 0xff).
pub fn read_lenenc(b: &[u8]) -> Option<(u64, usize)> {
    let (&first, rest) = b.split_first()?;
    let le = |n: usize| {
        let mut x = [0u8; 8];
        x[..n].copy_from_slice(rest.get(..n)?);
        Some(u64::from_le_bytes(x))
    };
    match first {
        0..=250 => Some((first as u64, 1)),
        0xfc => Some((le(2)?, 3)),
        0xfd => Some((le(3)?, 4)),
        0xfe => Some((le(8)?, 9)),
        _ => None,
    }
}

/// The error an ERR packet carries; a malformed one is an error of its own.
pub fn parse_err(p: &[u8]) -> MyError {
    let Some((&[_, c0, c1], rest)) = p.split_first_chunk::<3>() else {
        return malformed("ERR packet", p);
    };
    let code = u16::from_le_bytes([c0, c1]);
    let (state, msg) = match rest.split_first() {
        Some((b'#', tail)) if tail.len() >= 5 => tail.split_at(5),
        _ => (&b"HY000"[..], rest),
    };
    MyError {
        code: Some(code),
        message: format!(
            "ERROR {code} ({}): {}",
            String::from_utf8_lossy(state),
            String::from_utf8_lossy(msg)
        ),
    }
}

/// Affected rows, last insert id and status of an OK packet (or of the EOF packet
/// that ends a result set under CLIENT_DEPRECATE_EOF). A missing status is 0.
pub fn parse_ok(p: &[u8]) -> MyResult<(Outcome, u16)> {
    let fields = || {
        let body = p.get(1..)?;
        let (rows, a) = read_lenenc(body)?;
        let body = body.get(a..)?;
        let (id, b) = read_lenenc(body)?;
        let status = match body.get(b..b + 2) {
            Some(&[s0, s1]) => u16::from_le_bytes([s0, s1]),
            _ => 0,
        };
        let outcome = Outcome {
            rows,
            last_insert_id: id,
        };
        Some((outcome, status))
    };
    fields().ok_or_else(|| malformed("OK packet", p))
}

/// The column count at the start of a result set.
pub fn parse_column_count(p: &[u8]) -> MyResult<u64> {
    match read_lenenc(p) {
        Some((n, _)) if n > 0 => Ok(n),
        _ => Err(malformed("result set header", p)),
    }
}

/// The `columns` values of a text-protocol row, NULL as None.
pub fn parse_text_row(row: &[u8], columns: usize) -> MyResult<Vec<Option<String>>> {
    let mut p = row;
    // Every column takes at least one byte.
    let mut out = Vec::with_capacity(columns.min(p.len()));
    for _ in 0..columns {
        if let Some((0xfb, rest)) = p.split_first() {
            p = rest;
            out.push(None);
            continue;
        }
        let value = read_lenenc(p).and_then(|(len, n)| {
            let len = usize::try_from(len).ok()?;
            p.get(n..)?.split_at_checked(len)
        });
        let Some((v, rest)) = value else {
            return Err(malformed(&format!("row of {columns} columns"), row));
        };
        out.push(Some(String::from_utf8_lossy(v).into_owned()));
        p = rest;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const SERVER_MORE_RESULTS_EXISTS: u16 = 8;

    #[test]
    fn length_encoded_integers_round_trip() {
        for v in [
            0u64,
            250,
            251,
            65535,
            65536,
            0xff_ffff,
            0x100_0000,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            lenenc(&mut b, v);
            assert_eq!(read_lenenc(&b), Some((v, b.len())), "{v}");
        }
    }

    #[test]
    fn ok_and_err_packets_parse() {
        let (o, status) = parse_ok(&[0, 5, 0xfc, 0x10, 0x27, 8, 0, 0, 0]).unwrap();
        assert_eq!(o.rows, 5);
        assert_eq!(o.last_insert_id, 10_000);
        assert_eq!(status, SERVER_MORE_RESULTS_EXISTS);
        let e = parse_err(b"\xff\x26\x04#23000Duplicate entry");
        assert_eq!(e.code, Some(1062));
        assert_eq!(e.message, "ERROR 1062 (23000): Duplicate entry");
    }

    #[test]
    fn datetimes_are_civil_utc() {
        let mut p = Params {
            types: Vec::new(),
            values: Vec::new(),
        };
        // 2024-02-29 13:14:15 UTC
        p.datetime(UNIX_EPOCH + Duration::from_secs(1_709_212_455));
        assert_eq!(p.values, [7, 0xe8, 0x07, 2, 29, 13, 14, 15]);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }

    #[test]
    fn text_rows_parse_with_nulls() {
        let row = parse_text_row(b"\x03123\xfb\x00", 3).unwrap();
        assert_eq!(row, vec![Some("123".into()), None, Some(String::new())]);
    }

    #[test]
    fn malformed_packets_say_what_was_wrong() {
        assert_eq!(read_lenenc(&[0xfc, 1]), None);
        assert_eq!(read_lenenc(&[0xfb]), None);
        assert_eq!(read_lenenc(&[]), None);
        let e = parse_ok(&[0, 0xfd, 1]).unwrap_err();
        assert_eq!(
            e.message,
            "malformed OK packet from the server (3 bytes: 00 fd 01)"
        );
        let e = parse_err(&[0xff, 0x26]);
        assert_eq!(e.code, None);
        assert_eq!(
            e.message,
            "malformed ERR packet from the server (2 bytes: ff 26)"
        );
        let e = parse_text_row(b"\x05ab", 1).unwrap_err();
        assert_eq!(
            e.message,
            "malformed row of 1 columns from the server (3 bytes: 05 61 62)"
        );
        assert!(parse_text_row(b"\x00", 2).is_err());
        let e = parse_greeting(b"\x0a8.0.36").unwrap_err();
        assert!(
            e.message.contains("no end to the server version"),
            "{}",
            e.message
        );
        let e = parse_greeting(b"\x0a8.0.36\x00\x01\x02").unwrap_err();
        assert!(e.message.contains("capability flags"), "{}", e.message);
        let e = parse_prepare_ok(&[0, 1, 0, 0, 0]).unwrap_err();
        assert!(
            e.message.starts_with("malformed answer to a prepare"),
            "{}",
            e.message
        );
        assert!(parse_column_count(&[0]).is_err());
        assert!(parse_column_count(&[]).is_err());
    }
}
