//! mywire and mypacket against what a server might send: the packet parsers, and the
//! client over a socket whose other end replays a server's bytes. Random bytes,
//! truncated and mutated valid replies must give Ok or Err, never a panic; valid
//! replies must read back as sent.

use super::super::mypacket::{lenenc, read_lenenc, Greeting};
use super::*;
use crate::driver::wire_props::{edits, mutate, text};
use proptest::collection::vec;
use proptest::prelude::*;
use std::net::Shutdown;

const CASES: u32 = 2000;

const SERVER_CAPS: u32 = CLIENT_PROTOCOL_41
    | CLIENT_SECURE_CONNECTION
    | CLIENT_PLUGIN_AUTH
    | CLIENT_TRANSACTIONS
    | CLIENT_MULTI_RESULTS;

/// A server's packets, numbered: (sequence number, payload).
#[derive(Default)]
struct Script {
    packets: Vec<(u8, Vec<u8>)>,
    seq: u8,
}

impl Script {
    fn packet(&mut self, payload: &[u8]) {
        self.packets.push((self.seq, payload.to_vec()));
        self.seq = self.seq.wrapping_add(1);
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for (seq, payload) in &self.packets {
            b.extend_from_slice(&(payload.len() as u32).to_le_bytes()[..3]);
            b.push(*seq);
            b.extend_from_slice(payload);
        }
        b
    }

    /// A reply to a new command: numbering starts again.
    fn reply(&mut self) -> &mut Script {
        self.seq = 1;
        self
    }
}

fn greeting(version: &[u8], caps: u32, plugin: &[u8]) -> Vec<u8> {
    let mut g = vec![10];
    g.extend_from_slice(version);
    g.push(0);
    g.extend_from_slice(&7u32.to_le_bytes()); // connection id
    g.extend_from_slice(b"abcdefgh\0"); // scramble part 1, filler
    g.extend_from_slice(&(caps as u16).to_le_bytes());
    g.push(45);
    g.extend_from_slice(&2u16.to_le_bytes());
    g.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    g.push(21);
    g.extend_from_slice(&[0; 10]);
    g.extend_from_slice(b"ijklmnopqrst\0"); // scramble part 2: 13 bytes
    g.extend_from_slice(plugin);
    g.push(0);
    g
}

type Rows = Vec<Vec<Option<Vec<u8>>>>;

fn text_row(row: &[Option<Vec<u8>>]) -> Vec<u8> {
    let mut p = Vec::new();
    for c in row {
        match c {
            None => p.push(0xfb),
            Some(v) => {
                lenenc(&mut p, v.len() as u64);
                p.extend_from_slice(v);
            }
        }
    }
    p
}

/// 1 to 3 columns, up to 4 rows.
fn rows() -> impl Strategy<Value = Rows> {
    (1usize..4).prop_flat_map(|n| {
        let col = proptest::option::of(vec(any::<u8>(), 0..300));
        vec(vec(col, n..=n), 0..4)
    })
}

/// A result set of `rows` and its end, under CLIENT_DEPRECATE_EOF or not.
fn result_set(s: &mut Script, rows: &Rows, deprecate_eof: bool) {
    let columns = rows.first().map_or(1, Vec::len);
    s.reply().packet(&[columns as u8]);
    for i in 0..columns {
        s.packet(format!("\x03def\x00\x00\x00\x02c{i}").as_bytes());
    }
    if !deprecate_eof {
        s.packet(&[0xfe, 0, 0, 2, 0]);
    }
    for r in rows {
        s.packet(&text_row(r));
    }
    if deprecate_eof {
        s.packet(&[0xfe, 0, 0, 2, 0, 0, 0]);
    } else {
        s.packet(&[0xfe, 0, 0, 2, 0]);
    }
}

fn conversation(rows: &Rows, first_id: u64, deprecate_eof: bool) -> Vec<u8> {
    script(rows, first_id, deprecate_eof).bytes()
}

/// What a server says to `converse`: greeting and login, a query and a query_rows
/// both answered with `rows`, an init_db refused, a prepare, an execute inserting 3
/// rows from `first_id`.
fn script(rows: &Rows, first_id: u64, deprecate_eof: bool) -> Script {
    let caps = SERVER_CAPS
        | if deprecate_eof {
            CLIENT_DEPRECATE_EOF
        } else {
            0
        };
    let mut s = Script::default();
    s.packet(&greeting(b"8.0.36", caps, b"caching_sha2_password"));
    s.seq = 2;
    s.packet(&[1, 3]); // fast auth done
    s.packet(&[0, 0, 0, 2, 0, 0, 0]);
    result_set(&mut s, rows, deprecate_eof);
    result_set(&mut s, rows, deprecate_eof);
    s.reply().packet(b"\xff\x19\x04#42000Unknown database 'x'");
    s.reply().packet(&[0, 9, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0]); // id 9, 1 column, 1 parameter
    for _ in 0..2 {
        s.packet(b"\x03def\x00\x00\x00\x01?");
        if !deprecate_eof {
            s.packet(&[0xfe, 0, 0, 2, 0]);
        }
    }
    let mut ok = vec![0, 3];
    lenenc(&mut ok, first_id);
    ok.extend_from_slice(&[2, 0, 0, 0]);
    s.reply().packet(&ok);
    s
}

/// What the client made of a conversation, call by call.
type Heard = (
    MyResult<Outcome>,
    MyResult<Vec<Vec<Option<String>>>>,
    MyResult<()>,
    MyResult<Prepared>,
    MyResult<Outcome>,
);

/// Log in and run the calls `conversation` answers against a server that sends
/// `bytes` and then closes; None if the login failed.
fn converse(bytes: &[u8]) -> Option<Heard> {
    let (client, mut server) = UnixStream::pair().unwrap();
    server.write_all(bytes).unwrap();
    server.shutdown(Shutdown::Write).unwrap();
    let mut c = MyClient::start(client, "u", Duration::from_secs(5)).ok()?;
    let q = c.query("SELECT a FROM t");
    let r = c.query_rows("SELECT a FROM t");
    let i = c.init_db("x");
    let p = c.prepare("INSERT INTO t VALUES (?)");
    let stmt = p.as_ref().map_or(Prepared { id: 1, params: 1 }, |s| *s);
    let e = c.execute(stmt, |p| p.i64(1));
    Some((q, r, i, p, e))
}

fn conversations() -> impl Strategy<Value = Vec<u8>> {
    (rows(), any::<u64>(), any::<bool>()).prop_map(|(r, id, d)| conversation(&r, id, d))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn random_packets_never_panic(p in vec(any::<u8>(), 0..64), columns in 0usize..8) {
        let _ = read_lenenc(&p);
        let _ = parse_ok(&p);
        let _ = parse_err(&p);
        let _ = parse_text_row(&p, columns);
        let _ = parse_text_row(&p, usize::MAX);
        let _ = parse_greeting(&p);
        let _ = parse_prepare_ok(&p);
        let _ = parse_column_count(&p);
    }

    #[test]
    fn length_encoded_integers_read_back_and_truncate_to_none(v in any::<u64>(), tail in vec(any::<u8>(), 0..4)) {
        let mut b = Vec::new();
        lenenc(&mut b, v);
        let n = b.len();
        b.extend_from_slice(&tail);
        prop_assert_eq!(read_lenenc(&b), Some((v, n)));
        for cut in 0..n {
            prop_assert_eq!(read_lenenc(&b[..cut]), None);
        }
    }

    #[test]
    fn valid_text_rows_read_back_and_truncated_ones_are_errors(
        r in vec(proptest::option::of(vec(any::<u8>(), 0..300)), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let p = text_row(&r);
        let row = parse_text_row(&p, r.len()).unwrap();
        prop_assert_eq!(row, r.iter().map(text).collect::<Vec<_>>());
        prop_assert!(parse_text_row(&p[..cut.index(p.len())], r.len()).is_err());
    }

    #[test]
    fn mutated_text_rows_never_panic(
        r in vec(proptest::option::of(vec(any::<u8>(), 0..40)), 1..5),
        e in edits(),
    ) {
        let _ = parse_text_row(&mutate(text_row(&r), &e), r.len());
    }

    #[test]
    fn valid_greetings_read_back_and_cut_or_mutated_ones_never_panic(
        version in "[0-9a-z.-]{0,20}",
        caps in any::<u32>(),
        plugin in "[a-z_]{0,24}",
        cut in any::<prop::sample::Index>(),
        e in edits(),
    ) {
        let g = greeting(version.as_bytes(), caps, plugin.as_bytes());
        let want = Greeting { server_version: version, caps, plugin };
        prop_assert_eq!(parse_greeting(&g).unwrap(), want);
        let _ = parse_greeting(&g[..cut.index(g.len())]);
        let _ = parse_greeting(&mutate(g, &e));
    }

    #[test]
    fn a_valid_conversation_reads_back(r in rows(), first_id in 1u64..1 << 62, d in any::<bool>()) {
        let (q, rr, i, p, e) = converse(&conversation(&r, first_id, d)).expect("login");
        prop_assert_eq!(q.unwrap().rows, r.len() as u64);
        let want: Vec<Vec<Option<String>>> =
            r.iter().map(|row| row.iter().map(text).collect()).collect();
        prop_assert_eq!(rr.unwrap(), want);
        prop_assert_eq!(i.unwrap_err().code, Some(1049));
        let p = p.unwrap();
        prop_assert_eq!((p.id, p.params), (9, 1));
        prop_assert_eq!(e.unwrap(), Outcome { rows: 3, last_insert_id: first_id });
    }

    #[test]
    fn random_replies_never_panic(b in vec(any::<u8>(), 0..256)) {
        converse(&b);
    }

    #[test]
    fn random_replies_after_a_login_never_panic(b in vec(any::<u8>(), 0..256), d in any::<bool>()) {
        let mut v = conversation(&Vec::new(), 1, d);
        let login = 4 + v[0] as usize + 4 + 2 + 4 + 7;
        v.truncate(login);
        v.extend_from_slice(&b);
        converse(&v);
    }

    #[test]
    fn truncated_replies_never_panic(
        (v, cut) in conversations().prop_flat_map(|v| {
            let n = v.len();
            (Just(v), 0..n)
        })
    ) {
        // Cut anywhere, the last call must fail: the server closed before its answer.
        let heard = converse(&v[..cut]);
        prop_assert!(heard.is_none_or(|(_, _, _, _, e)| e.is_err()));
    }

    /// One packet cut short, its header saying so: each reader must cope.
    #[test]
    fn truncated_packets_never_panic(
        r in rows(),
        d in any::<bool>(),
        which in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut s = script(&r, 1, d);
        let at = which.index(s.packets.len());
        let payload = &mut s.packets[at].1;
        payload.truncate(cut.index(payload.len() + 1));
        converse(&s.bytes());
    }

    #[test]
    fn mutated_replies_never_panic(v in conversations(), e in edits()) {
        converse(&mutate(v, &e));
    }

    /// A header may claim up to 16 MiB: the client must neither trust it for an
    /// allocation nor slice by it.
    #[test]
    fn lying_lengths_never_panic(len in 0u32..1 << 24, tail in vec(any::<u8>(), 0..64)) {
        let mut b = Vec::new();
        b.extend_from_slice(&len.to_le_bytes()[..3]);
        b.push(0);
        b.extend_from_slice(&tail);
        converse(&b);
    }
}
