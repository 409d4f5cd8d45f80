//! Latency and rate accounting. Each thread owns a `Recorder`: full-step histograms
//! (merged once at the end) and interval counters that only its thread writes, read by
//! one reporter. No lock and no shared cache line on the hot path.
//!
//! A warm-up is cut by each thread itself (`Recorder::rebase`): it notes its counters'
//! values at the cut and empties its histograms, so the summary's totals (`measured`)
//! are differences while the intervals keep counting through the warm-up.

use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Kinds of operation, as named in the event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Insert,
    Delete,
    RangeQuery,
    PointQuery,
    CreateIndex,
    Cleanup,
    /// A read statement that is neither a point nor a range query (micro: scan).
    Query,
    Update,
    /// A multi-statement transaction (micro: read-only, write-only, read-write).
    Transaction,
    Get,
    Put,
    SeekNext,
    SeekPrev,
    Flush,
    Compact,
}

impl OpKind {
    pub const COUNT: usize = 15;

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Insert => "insert",
            OpKind::Delete => "delete",
            OpKind::RangeQuery => "range_query",
            OpKind::PointQuery => "point_query",
            OpKind::CreateIndex => "create_index",
            OpKind::Cleanup => "cleanup",
            OpKind::Query => "query",
            OpKind::Update => "update",
            OpKind::Transaction => "transaction",
            OpKind::Get => "get",
            OpKind::Put => "put",
            OpKind::SeekNext => "seek_next",
            OpKind::SeekPrev => "seek_prev",
            OpKind::Flush => "flush",
            OpKind::Compact => "compact",
        }
    }
}

/// A value alone on its cache lines (two, as the adjacent-line prefetcher pairs them),
/// so that threads writing neighbouring values do not invalidate each other's.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// Largest latency a histogram holds (1 hour, microseconds); larger values saturate.
const MAX_LATENCY_US: u64 = 3_600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// One op kind's counters; padded so two kinds or two threads never share a cache line.
#[derive(Default)]
#[repr(align(64))]
struct KindCounters {
    ops: AtomicU64,
    rows: AtomicU64,
    errors: AtomicU64,
    /// Largest latency since the reporter last took it.
    max_us: AtomicU64,
    /// ops, rows, errors when the measured window began (0 without a warm-up).
    base: [AtomicU64; 3],
}

impl KindCounters {
    fn counts(&self) -> [u64; 3] {
        [&self.ops, &self.rows, &self.errors].map(|a| a.load(Relaxed))
    }
}

/// Cumulative counters of one thread. Only the owning thread writes ops/rows/errors
/// (plain load + store, no read-modify-write); the reporter takes differences.
#[derive(Default)]
pub struct ThreadCounters {
    kinds: [KindCounters; OpKind::COUNT],
}

/// What happened to one op kind: totals or one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub ops: u64,
    pub rows: u64,
    pub errors: u64,
    pub max_us: u64,
}

fn bump(a: &AtomicU64, by: u64) {
    a.store(a.load(Relaxed) + by, Relaxed);
}

/// The hot-path side: one per thread.
pub struct Recorder {
    counters: Arc<ThreadCounters>,
    hists: Vec<Option<Histogram<u64>>>,
}

impl Recorder {
    pub fn record_ok(&mut self, kind: OpKind, latency_us: u64, rows: u64) {
        let c = &self.counters.kinds[kind as usize];
        bump(&c.ops, 1);
        bump(&c.rows, rows);
        if latency_us > c.max_us.load(Relaxed) {
            c.max_us.fetch_max(latency_us, Relaxed);
        }
        let h = self.hists[kind as usize].get_or_insert_with(new_histogram);
        h.saturating_record(latency_us.max(1));
    }

    pub fn record_error(&mut self, kind: OpKind) {
        bump(&self.counters.kinds[kind as usize].errors, 1);
    }

    /// The measured window begins: what was recorded so far was warm-up.
    pub fn rebase(&mut self) {
        for c in &self.counters.kinds {
            for (b, v) in c.base.iter().zip(c.counts()) {
                b.store(v, Relaxed);
            }
        }
        self.hists.iter_mut().for_each(|h| *h = None);
    }

    /// Hand the histograms over at the end of the thread's work.
    pub fn into_histograms(self) -> Vec<Option<Histogram<u64>>> {
        self.hists
    }
}

/// The reporter side: knows every thread's counters.
#[derive(Default)]
pub struct Stats {
    threads: Mutex<Vec<Arc<ThreadCounters>>>,
    last: Mutex<[Counts; OpKind::COUNT]>,
}

impl Stats {
    pub fn recorder(&self) -> Recorder {
        let counters = Arc::new(ThreadCounters::default());
        self.threads.lock().unwrap().push(counters.clone());
        Recorder {
            counters,
            hists: vec![None; OpKind::COUNT],
        }
    }

    /// Totals since the step began (warm-up included), per op kind.
    pub fn totals(&self) -> [Counts; OpKind::COUNT] {
        self.sum(|c| c.counts())
    }

    /// Totals of the measured window (after each thread's rebase), per op kind.
    pub fn measured(&self) -> [Counts; OpKind::COUNT] {
        self.sum(|c| {
            let base = c.base.each_ref().map(|b| b.load(Relaxed));
            let now = c.counts();
            [0, 1, 2].map(|i| now[i].saturating_sub(base[i]))
        })
    }

    fn sum(&self, f: impl Fn(&KindCounters) -> [u64; 3]) -> [Counts; OpKind::COUNT] {
        let mut out = [Counts::default(); OpKind::COUNT];
        for t in self.threads.lock().unwrap().iter() {
            for (o, c) in out.iter_mut().zip(&t.kinds) {
                let [ops, rows, errors] = f(c);
                o.ops += ops;
                o.rows += rows;
                o.errors += errors;
            }
        }
        out
    }

    /// What happened since the previous call: counts and the largest latency.
    pub fn interval(&self) -> [Counts; OpKind::COUNT] {
        let totals = self.totals();
        let mut last = self.last.lock().unwrap();
        let mut out = [Counts::default(); OpKind::COUNT];
        for (i, o) in out.iter_mut().enumerate() {
            o.ops = totals[i].ops - last[i].ops;
            o.rows = totals[i].rows - last[i].rows;
            o.errors = totals[i].errors - last[i].errors;
        }
        for t in self.threads.lock().unwrap().iter() {
            for (o, c) in out.iter_mut().zip(&t.kinds) {
                o.max_us = o.max_us.max(c.max_us.swap(0, Relaxed));
            }
        }
        *last = totals;
        out
    }
}

/// Merge per-thread histograms into one per op kind.
pub fn merge(all: Vec<Vec<Option<Histogram<u64>>>>) -> Vec<Histogram<u64>> {
    let mut out: Vec<Histogram<u64>> = (0..OpKind::COUNT).map(|_| new_histogram()).collect();
    for hists in all {
        for (o, h) in out.iter_mut().zip(hists) {
            if let Some(h) = h {
                o.add(&h).expect("histograms share bounds");
            }
        }
    }
    out
}

/// Latency percentiles as the summary reports them, microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Percentiles {
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
    pub mean: f64,
}

pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles {
            p50: 0,
            p99: 0,
            p999: 0,
            p9999: 0,
            max: 0,
            mean: 0.0,
        };
    }
    Percentiles {
        p50: h.value_at_quantile(0.5),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        p9999: h.value_at_quantile(0.9999),
        max: h.max(),
        mean: h.mean(),
    }
}

/// The standard V2 compressed encoding, base64, as HdrHistogram tools read it.
pub fn encode(h: &Histogram<u64>) -> String {
    use base64::Engine;
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serialize to memory");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn intervals_are_differences_and_totals_add_up() {
        let stats = Stats::default();
        let mut a = stats.recorder();
        let mut b = stats.recorder();
        a.record_ok(OpKind::Insert, 100, 10);
        b.record_ok(OpKind::Insert, 300, 10);
        b.record_error(OpKind::Insert);
        let first = stats.interval()[OpKind::Insert as usize];
        assert_eq!(
            first,
            Counts {
                ops: 2,
                rows: 20,
                errors: 1,
                max_us: 300
            }
        );
        a.record_ok(OpKind::Insert, 50, 5);
        let second = stats.interval()[OpKind::Insert as usize];
        assert_eq!(
            second,
            Counts {
                ops: 1,
                rows: 5,
                errors: 0,
                max_us: 50
            }
        );
        assert_eq!(stats.totals()[OpKind::Insert as usize].ops, 3);
        assert_eq!(stats.interval()[OpKind::Delete as usize], Counts::default());
    }

    #[test]
    fn a_rebase_cuts_the_warmup_from_the_measured_totals_only() {
        let stats = Stats::default();
        let mut a = stats.recorder();
        let mut b = stats.recorder();
        a.record_ok(OpKind::Get, 100, 1);
        a.record_error(OpKind::Get);
        b.record_ok(OpKind::Get, 200, 1);
        a.rebase();
        a.record_ok(OpKind::Get, 7, 1);
        let m = stats.measured()[OpKind::Get as usize];
        assert_eq!(
            (m.ops, m.rows, m.errors),
            (2, 2, 0),
            "b has not rebased yet"
        );
        b.rebase();
        let m = stats.measured()[OpKind::Get as usize];
        assert_eq!((m.ops, m.errors), (1, 0));
        assert_eq!(stats.totals()[OpKind::Get as usize].ops, 3);
        let merged = merge(vec![a.into_histograms(), b.into_histograms()]);
        assert_eq!(merged[OpKind::Get as usize].len(), 1);
        assert_eq!(merged[OpKind::Get as usize].max(), 7);
    }

    #[test]
    fn merged_histograms_hold_every_thread() {
        let stats = Stats::default();
        let mut a = stats.recorder();
        let mut b = stats.recorder();
        for v in 1..=1000 {
            a.record_ok(OpKind::PointQuery, v, 1);
            b.record_ok(OpKind::PointQuery, v + 1000, 1);
        }
        let merged = merge(vec![a.into_histograms(), b.into_histograms()]);
        let h = &merged[OpKind::PointQuery as usize];
        assert_eq!(h.len(), 2000);
        let p = percentiles(h);
        assert!((995..=1005).contains(&p.p50), "p50 {}", p.p50);
        assert!((1995..=2001).contains(&p.max), "max {}", p.max);
        assert_eq!(percentiles(&merged[OpKind::Insert as usize]).max, 0);
    }

    #[test]
    fn encoding_round_trips() {
        use base64::Engine;
        let mut h = new_histogram();
        h.record(42).unwrap();
        h.saturating_record(u64::MAX);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encode(&h))
            .unwrap();
        let back: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back.min(), 42);
    }
}
