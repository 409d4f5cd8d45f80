//! Random values of the microbenchmarks, as sysbench makes them: uniform ids, distinct
//! id lists, zipfian ids, and the `c`/`pad` strings of digit groups.

use rand::rngs::SmallRng;
use rand::Rng;

/// Ids of the hot set of hot-points (the first ones of each table).
pub const HOT_IDS: i64 = 100;

/// sysbench's `c` is 10 groups of 11 digits, `pad` 5, joined by '-'.
const C_GROUPS: usize = 10;
const PAD_GROUPS: usize = 5;

/// Fill `s` with `groups` groups of 11 random digits joined by '-'.
fn fill_groups(rng: &mut SmallRng, s: &mut String, groups: usize) {
    s.clear();
    for g in 0..groups {
        if g > 0 {
            s.push('-');
        }
        for _ in 0..11 {
            s.push(char::from(b'0' + rng.gen_range(0..10u8)));
        }
    }
}

pub fn fill_c(rng: &mut SmallRng, s: &mut String) {
    fill_groups(rng, s, C_GROUPS);
}

pub fn fill_pad(rng: &mut SmallRng, s: &mut String) {
    fill_groups(rng, s, PAD_GROUPS);
}

/// `out.len()` distinct ids drawn uniformly from 1..=n (n must be at least out.len()).
pub fn distinct_ids(rng: &mut SmallRng, n: i64, out: &mut [i64]) {
    for i in 0..out.len() {
        loop {
            let id = rng.gen_range(1..=n);
            if !out[..i].contains(&id) {
                out[i] = id;
                break;
            }
        }
    }
}

/// Zipfian ids over 1..=n, id 1 the most frequent (Gray et al., "Quickly generating
/// billion-record synthetic databases", as YCSB's ZipfianGenerator), theta 0.99.
pub struct Zipf {
    n: f64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    pub const THETA: f64 = 0.99;

    /// O(n) once, for the zeta constant.
    pub fn new(n: u64, theta: f64) -> Zipf {
        let zeta = |n: u64| (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let (zetan, zeta2) = (zeta(n), zeta(2.min(n)));
        let nf = n as f64;
        Zipf {
            n: nf,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / nf).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
        }
    }

    pub fn sample(&self, rng: &mut SmallRng) -> i64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 1;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 2.min(self.n as i64);
        }
        let id = 1 + (self.n * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as i64;
        id.clamp(1, self.n as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn strings_have_sysbench_lengths() {
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut c, mut pad) = (String::new(), String::new());
        fill_c(&mut rng, &mut c);
        fill_pad(&mut rng, &mut pad);
        assert_eq!((c.len(), pad.len()), (119, 59));
        assert_eq!(c.matches('-').count(), 9);
    }

    #[test]
    fn distinct_ids_are_distinct_and_in_range() {
        let mut rng = SmallRng::seed_from_u64(2);
        let mut ids = [0i64; 10];
        for _ in 0..100 {
            distinct_ids(&mut rng, 12, &mut ids);
            let mut s = ids.to_vec();
            s.sort();
            s.dedup();
            assert_eq!(s.len(), 10);
            assert!(ids.iter().all(|&i| (1..=12).contains(&i)));
        }
    }

    #[test]
    fn zipf_favours_the_first_ids() {
        let mut rng = SmallRng::seed_from_u64(3);
        let z = Zipf::new(10_000, Zipf::THETA);
        let draws: Vec<i64> = (0..20_000).map(|_| z.sample(&mut rng)).collect();
        assert!(draws.iter().all(|&i| (1..=10_000).contains(&i)));
        let ones = draws.iter().filter(|&&i| i == 1).count();
        let top100 = draws.iter().filter(|&&i| i <= 100).count();
        assert!(ones > 1000, "id 1 drawn {ones} times");
        assert!(top100 > 8000, "ids <= 100 drawn {top100} times");
    }
}
