//! The null driver's dense sets: a bitmap over `0..len` with counts over ranges, so
//! that the null driver's own lookups cost a load or two and a benchmark of the loop
//! against it (bench/hot_path.py) measures the loop, not a B-tree.

pub struct Bits {
    words: Vec<u64>,
}

impl Bits {
    /// Room for `0..len` (rounded up to a multiple of 64), every bit clear.
    pub fn new(len: u64) -> Bits {
        Bits {
            words: vec![0; len.div_ceil(64) as usize],
        }
    }

    pub fn len(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    pub fn get(&self, i: u64) -> bool {
        self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Set bit `i` to `v`; returns what it was.
    pub fn set(&mut self, i: u64, v: bool) -> bool {
        let w = &mut self.words[(i / 64) as usize];
        let (mask, was) = (1 << (i % 64), *w & (1 << (i % 64)) != 0);
        if v {
            *w |= mask;
        } else {
            *w &= !mask;
        }
        was
    }

    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Set every bit of `lo..hi`, clipped to the bitmap.
    pub fn set_range(&mut self, lo: u64, hi: u64) {
        for i in lo..hi.min(self.len()) {
            self.set(i, true);
        }
    }

    /// Bits set in `lo..=hi`, clipped to the bitmap.
    pub fn count(&self, lo: u64, hi: u64) -> u64 {
        let hi = hi.min(self.len().saturating_sub(1));
        if self.words.is_empty() || lo > hi {
            return 0;
        }
        let (first, last) = ((lo / 64) as usize, (hi / 64) as usize);
        let low_mask = u64::MAX << (lo % 64);
        let high_mask = u64::MAX >> (63 - hi % 64);
        if first == last {
            return (self.words[first] & low_mask & high_mask).count_ones() as u64;
        }
        let middle: u64 = self.words[first + 1..last]
            .iter()
            .map(|w| w.count_ones() as u64)
            .sum();
        (self.words[first] & low_mask).count_ones() as u64
            + middle
            + (self.words[last] & high_mask).count_ones() as u64
    }

    /// Bits set from `lo` upwards, counting no further than `limit`.
    pub fn count_up(&self, lo: u64, limit: u64) -> u64 {
        if lo >= self.len() {
            return 0;
        }
        let first = (lo / 64) as usize;
        let mut n = (self.words[first] & (u64::MAX << (lo % 64))).count_ones() as u64;
        for w in &self.words[first + 1..] {
            if n >= limit {
                break;
            }
            n += w.count_ones() as u64;
        }
        n.min(limit)
    }

    /// Bits set from `hi` (included) downwards, counting no further than `limit`.
    pub fn count_down(&self, hi: u64, limit: u64) -> u64 {
        if self.words.is_empty() {
            return 0;
        }
        let hi = hi.min(self.len() - 1);
        let last = (hi / 64) as usize;
        let mut n = (self.words[last] & (u64::MAX >> (63 - hi % 64))).count_ones() as u64;
        for w in self.words[..last].iter().rev() {
            if n >= limit {
                break;
            }
            n += w.count_ones() as u64;
        }
        n.min(limit)
    }

    /// The largest bit set.
    pub fn last(&self) -> Option<u64> {
        let (i, w) = self
            .words
            .iter()
            .enumerate()
            .rev()
            .find(|(_, w)| **w != 0)?;
        Some(i as u64 * 64 + 63 - w.leading_zeros() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn counts_match_an_ordered_set(
            len in 0u64..300,
            set in proptest::collection::vec(0u64..300, 0..120),
            lo in 0u64..320,
            hi in 0u64..320,
            limit in 0u64..40,
        ) {
            let mut bits = Bits::new(len);
            let mut model = BTreeSet::new();
            let room = bits.len();
            for i in set.into_iter().filter(|&i| i < room) {
                prop_assert_eq!(bits.set(i, true), !model.insert(i));
            }
            prop_assert_eq!(bits.count(lo, hi), if lo <= hi { model.range(lo..=hi).count() as u64 } else { 0 });
            prop_assert_eq!(bits.count_up(lo, limit), model.range(lo..).take(limit as usize).count() as u64);
            prop_assert_eq!(bits.count_down(hi, limit), model.range(..=hi).rev().take(limit as usize).count() as u64);
            prop_assert_eq!(bits.last(), model.last().copied());
            for i in 0..bits.len() {
                prop_assert_eq!(bits.get(i), model.contains(&i));
            }
        }
    }

    #[test]
    fn ranges_set_and_clear() {
        let mut b = Bits::new(130);
        assert_eq!(b.len(), 192);
        b.set_range(5, 1000);
        assert_eq!(b.count(0, u64::MAX), 187);
        assert!(b.set(100, false));
        assert_eq!(b.count(64, 127), 63);
        b.clear();
        assert_eq!((b.count(0, 200), b.last()), (0, None));
    }
}
