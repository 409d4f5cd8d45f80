//! Encoding and decoding of MySQL protocol packets for `mywire`: length-encoded
//! integers, OK/ERR packets, binary statement parameters, text rows.

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

/// A length-encoded integer at the start of `b`, and the bytes it took.
pub fn read_lenenc(b: &[u8]) -> (u64, usize) {
    let le = |n: usize| {
        let mut x = [0u8; 8];
        let n = n.min(b.len().saturating_sub(1));
        x[..n].copy_from_slice(&b[1..1 + n]);
        u64::from_le_bytes(x)
    };
    match b.first() {
        Some(&v @ 0..=250) => (v as u64, 1),
        Some(0xfc) => (le(2), 3),
        Some(0xfd) => (le(3), 4),
        Some(0xfe) => (le(8), 9),
        _ => (0, 1),
    }
}

pub fn parse_err(p: &[u8]) -> MyError {
    let code = u16::from_le_bytes([p[1], p[2]]);
    let rest = &p[3..];
    let (state, msg) = match rest.first() {
        Some(b'#') if rest.len() >= 6 => (&rest[1..6], &rest[6..]),
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

/// Affected rows, last insert id and status of an OK packet.
pub fn parse_ok(p: &[u8]) -> (Outcome, u16) {
    let (rows, a) = read_lenenc(&p[1..]);
    let (id, b) = read_lenenc(&p[1 + a..]);
    let at = 1 + a + b;
    let status = p
        .get(at..at + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]));
    let outcome = Outcome {
        rows,
        last_insert_id: id,
    };
    (outcome, status)
}

pub fn parse_text_row(mut p: &[u8], columns: usize) -> Vec<Option<String>> {
    (0..columns)
        .map(|_| {
            if p.first() == Some(&0xfb) {
                p = &p[1..];
                return None;
            }
            let (len, n) = read_lenenc(p);
            let end = (n + len as usize).min(p.len());
            let v = String::from_utf8_lossy(&p[n..end]).into_owned();
            p = &p[end..];
            Some(v)
        })
        .collect()
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
            assert_eq!(read_lenenc(&b), (v, b.len()), "{v}");
        }
    }

    #[test]
    fn ok_and_err_packets_parse() {
        let (o, status) = parse_ok(&[0, 5, 0xfc, 0x10, 0x27, 8, 0, 0, 0]);
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
        let row = parse_text_row(b"\x03123\xfb\x00", 3);
        assert_eq!(row, vec![Some("123".into()), None, Some(String::new())]);
    }
}
