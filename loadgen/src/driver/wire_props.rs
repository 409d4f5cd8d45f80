//! What the wire readers' property tests share (pgwire/props.rs, mywire/props.rs):
//! byte-level mutations of valid messages, and reading a text cell.

use proptest::collection::vec;
use proptest::prelude::*;

/// Byte edits: (where, what: 0 replace / 1 insert / 2 delete, byte).
pub fn mutate(mut v: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(at, kind, byte) in edits {
        let at = at % (v.len() + 1);
        match kind % 3 {
            0 if at < v.len() => v[at] = byte,
            1 => v.insert(at, byte),
            _ if at < v.len() => {
                v.remove(at);
            }
            _ => v.push(byte),
        }
    }
    v
}

pub fn edits() -> impl Strategy<Value = Vec<(usize, u8, u8)>> {
    vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6)
}

pub fn text(c: &Option<Vec<u8>>) -> Option<String> {
    c.as_ref().map(|v| String::from_utf8_lossy(v).into_owned())
}
