//! RocksDB's statistics string, read by name: ticker and histogram ids shift between
//! versions, their names do not.

use std::collections::BTreeMap;

/// Counters by name from RocksDB's statistics string: tickers (`name COUNT : n`) as
/// `name`, histograms (`name P50 : .. COUNT : n SUM : s`) as `name.count` and `name.sum`.
/// Names, not ids: ids shift between versions.
pub fn parse_statistics(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        let Some((name, rest)) = t.split_first() else {
            continue;
        };
        let field = |label: &str| {
            rest.windows(3)
                .find(|w| w[0] == label && w[1] == ":")
                .and_then(|w| w[2].parse::<f64>().ok())
        };
        match (rest.first(), field("COUNT"), field("SUM")) {
            (Some(&"COUNT"), Some(n), _) => {
                out.insert(name.to_string(), n);
            }
            (Some(_), Some(n), Some(s)) => {
                out.insert(format!("{name}.count"), n);
                out.insert(format!("{name}.sum"), s);
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    /// Excerpts of rocksdb_options_statistics_get_string from RocksDB 6.22.1 and 11.8.1
    /// (counts made up): the same names sit at different positions and ids.
    const STATS_6_22: &str = "\
    rocksdb.block.cache.miss COUNT : 12
    rocksdb.bytes.written COUNT : 84000000
    rocksdb.l0.num.files.stall.micros COUNT : 0
    rocksdb.stall.micros COUNT : 1500
    rocksdb.compact.write.bytes COUNT : 20000
    rocksdb.flush.write.bytes COUNT : 85789139
    rocksdb.db.get.micros P50 : 2.500000 P95 : 4.100000 P99 : 9.000000 P100 : 120.000000 COUNT : 400 SUM : 1234
    ";

    const STATS_11_8: &str = "\
    rocksdb.block.cache.miss COUNT : 7
    rocksdb.sim.block.cache.miss COUNT : 0
    rocksdb.bytes.written COUNT : 42
    rocksdb.stall.micros COUNT : 0
    rocksdb.compact.write.bytes COUNT : 3
    rocksdb.flush.write.bytes COUNT : 5
    rocksdb.remote.compact.write.bytes COUNT : 9
    rocksdb.db.get.micros P50 : 0.000000 P95 : 0.000000 P99 : 0.000000 P100 : 0.000000 COUNT : 0 SUM : 0
    ";

    #[test]
    fn statistics_are_read_by_name_in_both_formats() {
        let old = parse_statistics(STATS_6_22);
        assert_eq!(old["rocksdb.bytes.written"], 84_000_000.0);
        assert_eq!(old["rocksdb.stall.micros"], 1500.0);
        assert_eq!(old["rocksdb.flush.write.bytes"], 85_789_139.0);
        assert_eq!(old["rocksdb.db.get.micros.count"], 400.0);
        assert_eq!(old["rocksdb.db.get.micros.sum"], 1234.0);
        assert!(!old.contains_key("rocksdb.db.get.micros"));
        let new = parse_statistics(STATS_11_8);
        assert_eq!(new["rocksdb.bytes.written"], 42.0);
        assert_eq!(new["rocksdb.compact.write.bytes"], 3.0);
        assert_eq!(new["rocksdb.remote.compact.write.bytes"], 9.0);
        assert_eq!(new.len(), 9);
        assert!(parse_statistics("garbage\n\nx COUNT :").is_empty());
    }
}
