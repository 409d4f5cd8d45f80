//! What the kv steps write: keys as driver::kv::encode_key lays them out, values cut
//! from a buffer of data that compresses about 2:1, as db_bench's RandomGenerator does
//! with its default compression ratio 0.5.

use crate::driver::kv::{encode_key, key_buffer};
use rand::rngs::SmallRng;
use rand::Rng;

/// Size of the value buffer; values are windows into it, so nothing is generated per put.
const BUFFER: usize = 1 << 20;
/// Each chunk is half random bytes, half a copy of them.
const CHUNK: usize = 100;

/// One reusable key buffer.
pub struct Key {
    buf: Vec<u8>,
}

impl Key {
    pub fn new(size: usize) -> Key {
        Key {
            buf: key_buffer(size),
        }
    }

    /// The bytes of key `n`.
    pub fn of(&mut self, n: u64) -> &[u8] {
        encode_key(n, &mut self.buf);
        &self.buf
    }
}

pub struct Values {
    data: Vec<u8>,
    size: usize,
    pos: usize,
}

impl Values {
    pub fn new(size: usize, rng: &mut SmallRng) -> Values {
        let mut data = Vec::with_capacity(BUFFER.max(size) + CHUNK);
        while data.len() < BUFFER.max(size) {
            let half: Vec<u8> = (0..CHUNK / 2).map(|_| rng.gen_range(b' '..=b'~')).collect();
            data.extend_from_slice(&half);
            data.extend_from_slice(&half);
        }
        Values { data, size, pos: 0 }
    }

    /// The next value: the following window of the buffer, wrapping at its end.
    pub fn next(&mut self) -> &[u8] {
        if self.pos + self.size > self.data.len() {
            self.pos = 0;
        }
        let v = &self.data[self.pos..self.pos + self.size];
        self.pos += self.size;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn values_have_the_size_and_half_repeat() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut v = Values::new(400, &mut rng);
        let a = v.next().to_vec();
        let b = v.next().to_vec();
        assert_eq!((a.len(), b.len()), (400, 400));
        assert_ne!(a, b);
        assert_eq!(
            a[..50],
            a[50..100],
            "each 100-byte chunk repeats its first half"
        );
        for _ in 0..10_000 {
            assert_eq!(v.next().len(), 400);
        }
        let mut big = Values::new(3 << 20, &mut rng);
        assert_eq!(big.next().len(), 3 << 20);
    }

    #[test]
    fn keys_are_reused_buffers() {
        let mut k = Key::new(20);
        assert_eq!(k.of(258)[..8], [0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(k.of(1).len(), 20);
    }
}
