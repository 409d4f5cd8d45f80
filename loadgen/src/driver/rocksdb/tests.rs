use super::*;

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
