//! pgwire against what a server might send: the parsers, and the client over a socket
//! whose other end replays a server's bytes. Random bytes, truncated and mutated valid
//! replies must give Ok or Err, never a panic; valid replies must read back as sent.

use super::*;
use crate::driver::wire_props::{edits, mutate, text};
use proptest::collection::vec;
use proptest::prelude::*;
use std::net::Shutdown;

const CASES: u32 = 2000;

/// One message: type, length (itself included), body.
fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

fn data_row(cols: &[Option<Vec<u8>>]) -> Vec<u8> {
    let mut b = (cols.len() as i16).to_be_bytes().to_vec();
    for c in cols {
        match c {
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(v) => {
                b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                b.extend_from_slice(v);
            }
        }
    }
    b
}

type Rows = Vec<Vec<Option<Vec<u8>>>>;

fn rows() -> impl Strategy<Value = Rows> {
    let col = proptest::option::of(vec(any::<u8>(), 0..12));
    vec(vec(col, 0..5), 0..5)
}

/// What a server says to `converse`, message by message (type, body): login, a
/// simple query returning `rows`, a prepare, an insert returning `last`, a delete of
/// 5 rows.
fn messages(rows: &Rows, last: i64) -> Vec<(u8, Vec<u8>)> {
    let mut s = vec![
        (b'R', vec![0, 0, 0, 0]),
        (b'S', b"server_version\x0016.2\x00".to_vec()),
        (b'K', vec![0, 0, 0, 1, 0, 0, 0, 2]),
        (b'Z', b"I".to_vec()),
        (b'T', vec![0, 0]),
    ];
    s.extend(rows.iter().map(|r| (b'D', data_row(r))));
    s.extend([
        (b'C', format!("SELECT {}\0", rows.len()).into_bytes()),
        (b'Z', b"I".to_vec()),
        (b'1', vec![]),
        (b'Z', b"I".to_vec()),
        (b'2', vec![]),
        (b'D', data_row(&[Some(last.to_string().into_bytes())])),
        (b'C', b"INSERT 0 3\0".to_vec()),
        (b'Z', b"I".to_vec()),
        (b'2', vec![]),
        (b'C', b"DELETE 5\0".to_vec()),
        (b'Z', b"I".to_vec()),
    ]);
    s
}

fn frame(messages: &[(u8, Vec<u8>)]) -> Vec<u8> {
    messages.iter().flat_map(|(t, b)| msg(*t, b)).collect()
}

fn conversation(rows: &Rows, last: i64) -> Vec<u8> {
    frame(&messages(rows, last))
}

/// What the client made of a conversation, call by call.
type Heard = (
    PgResult<Vec<Vec<Option<String>>>>,
    PgResult<()>,
    PgResult<(u64, Option<String>)>,
    PgResult<u64>,
);

/// Log in and run the calls `conversation` answers against a server that sends
/// `bytes` and then closes; None if the login failed.
fn converse(bytes: &[u8]) -> Option<Heard> {
    let (client, mut server) = UnixStream::pair().unwrap();
    server.write_all(bytes).unwrap();
    server.shutdown(Shutdown::Write).unwrap();
    let mut c = PgClient::start(client, "u", "d", Duration::from_secs(5)).ok()?;
    let q = c.simple_query("SELECT x FROM t");
    let p = c.prepare("s0", "INSERT ...", &[INT4]);
    let i = c
        .execute_returning("s0", 1, |p| p.i32(7))
        .map(|(n, v)| (n, v.map(|v| String::from_utf8_lossy(v).into_owned())));
    let d = c.execute("s0", 1, |p| p.i64(5));
    Some((q, p, i, d))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn headers_of_random_bytes_never_panic(b in vec(any::<u8>(), 0..16)) {
        if let Ok(Some((_, total))) = header(&b) {
            prop_assert!(total >= 5);
        }
    }

    #[test]
    fn valid_data_rows_read_back(r in vec(proptest::option::of(vec(any::<u8>(), 0..40)), 0..8)) {
        let row = parse_text_row(&data_row(&r)).unwrap();
        prop_assert_eq!(row, r.iter().map(text).collect::<Vec<_>>());
    }

    #[test]
    fn random_data_rows_never_panic(b in vec(any::<u8>(), 0..64)) {
        let _ = parse_text_row(&b);
        let _ = parse_error(&b);
        let _ = tag_rows(&b);
    }

    #[test]
    fn truncated_data_rows_are_errors(
        (r, cut) in vec(proptest::option::of(vec(any::<u8>(), 0..20)), 1..6)
            .prop_flat_map(|r| {
                let n = data_row(&r).len();
                (Just(r), 0..n)
            })
    ) {
        prop_assert!(parse_text_row(&data_row(&r)[..cut]).is_err());
    }

    #[test]
    fn mutated_data_rows_never_panic(
        r in vec(proptest::option::of(vec(any::<u8>(), 0..20)), 0..6),
        e in edits(),
    ) {
        let _ = parse_text_row(&mutate(data_row(&r), &e));
    }

    #[test]
    fn a_valid_conversation_reads_back(r in rows(), last in any::<i64>()) {
        let (q, p, i, d) = converse(&conversation(&r, last)).expect("login");
        let want: Vec<Vec<Option<String>>> =
            r.iter().map(|row| row.iter().map(text).collect()).collect();
        prop_assert_eq!(q.unwrap(), want);
        prop_assert!(p.is_ok());
        prop_assert_eq!(i.unwrap(), (3, Some(last.to_string())));
        prop_assert_eq!(d.unwrap(), 5);
    }

    #[test]
    fn random_replies_never_panic(b in vec(any::<u8>(), 0..256)) {
        converse(&b);
    }

    #[test]
    fn truncated_replies_never_panic(
        (v, cut) in (rows(), any::<i64>())
            .prop_map(|(r, last)| conversation(&r, last))
            .prop_flat_map(|v| {
                let n = v.len();
                (Just(v), 0..n)
            })
    ) {
        // Cut anywhere, some call must fail: the server closed before its last answer.
        let heard = converse(&v[..cut]);
        prop_assert!(heard.is_none_or(|(_, _, _, d)| d.is_err()));
    }

    /// One message cut short, its length saying so: each reader must cope.
    #[test]
    fn truncated_messages_never_panic(
        r in rows(),
        last in any::<i64>(),
        which in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut m = messages(&r, last);
        let at = which.index(m.len());
        let body = &mut m[at].1;
        body.truncate(cut.index(body.len() + 1));
        converse(&frame(&m));
    }

    #[test]
    fn mutated_replies_never_panic(r in rows(), last in any::<i64>(), e in edits()) {
        converse(&mutate(conversation(&r, last), &e));
    }

    /// A header may claim any length: the client must neither trust it for an
    /// allocation nor slice by it.
    #[test]
    fn lying_lengths_never_panic(tag in any::<u8>(), len in any::<i32>(), tail in vec(any::<u8>(), 0..64)) {
        let mut b = msg(b'R', &[0, 0, 0, 0]);
        b.push(tag);
        b.extend_from_slice(&len.to_be_bytes());
        b.extend_from_slice(&tail);
        converse(&b);
    }
}

#[test]
fn command_tags_give_row_counts() {
    assert_eq!(tag_rows(b"SELECT 10\0"), 10);
    assert_eq!(tag_rows(b"INSERT 0 100\0"), 100);
    assert_eq!(tag_rows(b"DELETE 5\0"), 5);
    assert_eq!(tag_rows(b"CREATE INDEX\0"), 0);
}

#[test]
fn error_responses_keep_code_and_message() {
    let e = parse_error(b"SERROR\0VERROR\0C40P01\0Mdeadlock detected\0\0");
    assert_eq!(e.code.as_deref(), Some("40P01"));
    assert_eq!(e.message, "ERROR 40P01: deadlock detected");
}

#[test]
fn text_rows_parse_with_nulls() {
    let body = [
        &[0u8, 2][..],
        &3i32.to_be_bytes(),
        b"123",
        &(-1i32).to_be_bytes(),
    ]
    .concat();
    assert_eq!(
        parse_text_row(&body).unwrap(),
        vec![Some("123".to_string()), None]
    );
}

#[test]
fn malformed_replies_say_what_was_wrong() {
    let e = parse_text_row(&[0, 2, 0, 0, 0, 9, b'x']).unwrap_err();
    assert_eq!(
        e.message,
        "malformed DataRow from the server: column 1 of 2 claims 9 bytes, 1 remain"
    );
    let e = parse_text_row(&[0xff, 0xff]).unwrap_err();
    assert_eq!(
        e.message,
        "malformed DataRow from the server: column count -1"
    );
    let e = header(&[b'Z', 0, 0, 0, 3]).unwrap_err();
    assert_eq!(
        e.message,
        "malformed message from the server: type 'Z' with length 3, less than the 4 bytes \
         of the length itself"
    );
    let e = header(&[0, 0xff, 0xff, 0xff, 0xff]).unwrap_err();
    assert!(
        e.message.contains("type 0x00 with length -1"),
        "{}",
        e.message
    );
}

#[test]
fn a_huge_claimed_length_is_not_allocated_up_front() {
    let (client, mut server) = UnixStream::pair().unwrap();
    let mut m = messages(&vec![], 0);
    m.truncate(4); // the login
    let mut b = frame(&m);
    b.extend_from_slice(&[b'D', 0x7f, 0xff, 0xff, 0xff, 0, 1]);
    server.write_all(&b).unwrap();
    server.shutdown(Shutdown::Write).unwrap();
    let mut c = PgClient::start(client, "u", "d", Duration::from_secs(5)).unwrap();
    let e = c.simple_query("SELECT 1").unwrap_err();
    assert_eq!(e.message, "the server closed the connection");
    assert!(c.rbuf.len() <= 64 * 1024, "{} bytes", c.rbuf.len());
}

#[test]
fn timestamps_count_from_2000() {
    let mut buf = Vec::new();
    Params { buf: &mut buf }.timestamp(UNIX_EPOCH + Duration::from_secs(PG_EPOCH_UNIX_S + 1));
    assert_eq!(&buf[4..], &1_000_000i64.to_be_bytes());
}

#[test]
fn returning_keeps_the_last_rows_first_column_in_one_buffer() {
    let login = [(b'R', vec![0, 0, 0, 0]), (b'Z', b"I".to_vec())];
    let id = |v: &str| data_row(&[Some(v.as_bytes().to_vec()), Some(b"x".to_vec())]);
    let mut m = login.to_vec();
    // Three rows returned: the last one's first column is kept.
    m.extend([
        (b'2', vec![]),
        (b'D', id("7")),
        (b'D', id("8")),
        (b'D', id("19")),
        (b'C', b"INSERT 0 3\0".to_vec()),
        (b'Z', b"I".to_vec()),
    ]);
    // The last row's first column is NULL: nothing is kept from the rows before it.
    m.extend([
        (b'2', vec![]),
        (b'D', id("20")),
        (b'D', data_row(&[None])),
        (b'C', b"INSERT 0 2\0".to_vec()),
        (b'Z', b"I".to_vec()),
    ]);
    // A malformed row is an error (which ends the session).
    m.extend([(b'2', vec![]), (b'D', vec![0, 1, 0, 0, 0, 9])]);
    let (client, mut server) = UnixStream::pair().unwrap();
    server.write_all(&frame(&m)).unwrap();
    server.shutdown(Shutdown::Write).unwrap();
    let mut c = PgClient::start(client, "u", "d", Duration::from_secs(5)).unwrap();
    let insert = |c: &mut PgClient| {
        c.execute_returning("s0", 1, |p| p.i32(1))
            .map(|(n, v)| (n, v.map(|v| String::from_utf8_lossy(v).into_owned())))
    };
    assert_eq!(insert(&mut c).unwrap(), (3, Some("19".into())));
    assert_eq!(insert(&mut c).unwrap(), (2, None));
    let e = insert(&mut c).unwrap_err();
    assert!(e.message.contains("malformed DataRow"), "{}", e.message);
}
