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

fn options(json: &str) -> RocksOptions {
    serde_json::from_str(json).unwrap()
}

fn gate_error(json: &str, caps: &[&str], v: &str) -> String {
    let e = gate(&options(json), caps, Version::parse(v).unwrap()).unwrap_err();
    format!("{e:#}")
}

const CAPS_8_11: [&str; 3] = [
    "hyper_clock_cache",
    "auto_hyper_clock_cache",
    "wait_for_compact",
];

#[test]
fn options_a_build_lacks_are_refused_by_name_and_version() {
    let e = gate_error(
        r#"{"cache_mb": 8, "cache_type": "hyper_clock"}"#,
        &[],
        "7.8.3",
    );
    assert!(
        e.contains("hyper_clock") && e.contains("8.1") && e.contains("7.8.3"),
        "{e}"
    );
    let e = gate_error(
        r#"{"cache_mb": 8, "cache_type": "auto_hyper_clock"}"#,
        &["hyper_clock_cache"],
        "8.5",
    );
    assert!(
        e.contains("auto_hyper_clock") && e.contains("8.7") && e.contains("8.5.0"),
        "{e}"
    );
    let e = gate_error(
        r#"{"cache_mb": 8, "cache_type": "hyper_clock", "estimated_entry_charge": 0}"#,
        &["hyper_clock_cache"],
        "8.1.1",
    );
    assert!(
        e.contains("estimated_entry_charge 0") && e.contains("8.7"),
        "{e}"
    );
    let e = gate_error(r#"{"block_align": true}"#, &CAPS_8_11, "10.2.1");
    assert!(
        e.contains("block_align") && e.contains("11.0") && e.contains("10.2.1"),
        "{e}"
    );
    let e = gate_error(r#"{"cache_type": "hyper_clock"}"#, &CAPS_8_11, "8.11.4");
    assert!(e.contains("cache_mb"), "{e}");
}

#[test]
fn options_a_build_has_pass() {
    let v = Version::parse("8.11.4").unwrap();
    for json in [
        r#"{}"#,
        r#"{"cache_mb": 8, "cache_type": "auto_hyper_clock"}"#,
        r#"{"cache_mb": 8, "cache_type": "hyper_clock", "estimated_entry_charge": 0}"#,
    ] {
        gate(&options(json), &CAPS_8_11, v).unwrap();
    }
    let all = ["hyper_clock_cache", "block_align"];
    gate(
        &options(r#"{"block_align": true}"#),
        &all,
        Version(11, 0, 0),
    )
    .unwrap();
}
