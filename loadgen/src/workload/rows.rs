//! Random values of the Insert Benchmark (docs/lab-file.md, Steps), generated into a
//! reused batch so the hot loop allocates nothing per row.

use crate::driver::{InsertRow, RangeIndex};
use rand::rngs::SmallRng;
use rand::Rng;
use std::time::SystemTime;

const CASH_REGISTERS: i32 = 1000;
const PRODUCTS: i32 = 10_000;
const CUSTOMERS: i32 = 100_000;
const PRICES: i32 = 500;

pub struct RowGen {
    rng: SmallRng,
    batch: Vec<InsertRow>,
}

impl RowGen {
    pub fn new(rng: SmallRng) -> RowGen {
        RowGen {
            rng,
            batch: Vec::new(),
        }
    }

    /// The next `n` rows, stamped with the current time.
    pub fn batch(&mut self, n: usize) -> &[InsertRow] {
        let now = SystemTime::now();
        while self.batch.len() < n {
            self.batch.push(InsertRow {
                dateandtime: now,
                cashregisterid: 0,
                customerid: 0,
                productid: 0,
                price: 0,
                data: String::with_capacity(20),
            });
        }
        for row in &mut self.batch[..n] {
            row.dateandtime = now;
            row.cashregisterid = self.rng.gen_range(0..CASH_REGISTERS);
            row.customerid = self.rng.gen_range(0..CUSTOMERS);
            row.productid = self.rng.gen_range(0..PRODUCTS);
            row.price = self.rng.gen_range(0..PRICES);
            fill_data(&mut self.rng, &mut row.data);
        }
        &self.batch[..n]
    }
}

/// 10 to 20 characters, the first half random and the rest constant, so the column
/// compresses about 2:1 as in iibench.
fn fill_data(rng: &mut SmallRng, data: &mut String) {
    data.clear();
    let len = rng.gen_range(10..=20);
    let random = len / 2;
    for _ in 0..random {
        data.push(rng.gen_range(b'a'..=b'z') as char);
    }
    for _ in random..len {
        data.push('a');
    }
}

/// One of the three covering range queries, starting at a uniform value of its column.
pub fn range_query(rng: &mut SmallRng) -> (RangeIndex, i32) {
    let index = RangeIndex::ALL[rng.gen_range(0..3)];
    let limit = match index {
        RangeIndex::MarketSegment => PRODUCTS,
        RangeIndex::RegisterSegment => CASH_REGISTERS,
        RangeIndex::Pdc => PRICES,
    };
    (index, rng.gen_range(0..limit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn values_stay_in_their_domains() {
        let mut g = RowGen::new(SmallRng::seed_from_u64(3));
        for _ in 0..20 {
            for r in g.batch(50) {
                assert!((0..CASH_REGISTERS).contains(&r.cashregisterid));
                assert!((0..CUSTOMERS).contains(&r.customerid));
                assert!((0..PRODUCTS).contains(&r.productid));
                assert!((0..PRICES).contains(&r.price));
                assert!((10..=20).contains(&r.data.len()), "{}", r.data);
            }
        }
        assert_eq!(g.batch(7).len(), 7);
    }
}
