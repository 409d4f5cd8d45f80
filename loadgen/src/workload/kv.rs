//! db_bench-style steps (docs/lab-file.md, The kv benchmark) over driver::kv. Each client thread takes
//! a session; fillseq and flush_mt_l0 run on client 1 alone; in the *whilewriting steps
//! client 1 also runs the one background writer, paced in bytes per second.

use super::kv_data::{Key, Values};
use super::kv_loops::{InlinePuts, Reader, Writer};
use super::roles::{join, spawn_role};
use crate::context::{StepContext, Worker};
use crate::driver::kv::{KvConn, KvStore, WriteMode};
use crate::kvspec::{KvSpec, KvStep};
use crate::outcome::{ClientOutcome, Histograms, StepPlan};
use crate::output::QUnit;
use crate::pace::{Pacing, Stop};
use crate::spec::EngineSpec;
use crate::stats::OpKind;
use anyhow::{anyhow, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::time::Instant;

/// The reader's op kind of a read step, None for write steps.
fn read_kind(step: KvStep) -> Option<OpKind> {
    match step {
        KvStep::Readrandom | KvStep::ReadWhileWriting => Some(OpKind::Get),
        KvStep::Fwdrange | KvStep::FwdrangeWhileWriting => Some(OpKind::SeekNext),
        KvStep::Revrange | KvStep::RevrangeWhileWriting => Some(OpKind::SeekPrev),
        _ => None,
    }
}

fn while_writing(step: KvStep) -> bool {
    matches!(
        step,
        KvStep::ReadWhileWriting | KvStep::FwdrangeWhileWriting | KvStep::RevrangeWhileWriting
    )
}

/// The background writer's target in puts/s, None when it does not run.
fn writer_rate(kv: &KvSpec) -> Option<f64> {
    let bytes = kv.writer_bytes_per_s();
    (while_writing(kv.step) && bytes > 0.0).then(|| bytes / kv.entry_bytes() as f64)
}

pub fn plan(kv: &KvSpec) -> StepPlan {
    let (q_op, kinds) = match (kv.step, read_kind(kv.step)) {
        (_, Some(read)) if writer_rate(kv).is_some() => (read, vec![read, OpKind::Put]),
        (_, Some(read)) => (read, vec![read]),
        (KvStep::FlushMtL0, _) => (OpKind::Compact, vec![OpKind::Flush, OpKind::Compact]),
        (KvStep::OverwriteAndWait, _) => (OpKind::Put, vec![OpKind::Put, OpKind::Flush]),
        _ => (OpKind::Put, vec![OpKind::Put]),
    };
    let targets = writer_rate(kv)
        .map(|r| (OpKind::Put, r))
        .into_iter()
        .collect();
    StepPlan {
        kinds,
        q_op,
        q_unit: QUnit::Ops,
        targets,
    }
}

/// Run client `client` (1-based) of a kv step.
pub fn run_client(ctx: &StepContext, kv: &KvSpec, client: u32) -> Result<ClientOutcome> {
    let spec = &ctx.spec;
    let store = ctx
        .driver
        .kv()
        .ok_or_else(|| anyhow!("driver {} has no key-value store", ctx.driver.name()))?;
    let sync = matches!(&spec.engine, EngineSpec::Rocksdb { options, .. } if options.sync);
    let mode = WriteMode {
        disable_wal: kv.disable_wal(),
        sync,
    };
    let c = Client {
        ctx,
        kv,
        store,
        client,
        mode,
    };
    let single = matches!(kv.step, KvStep::Fillseq | KvStep::FlushMtL0);
    if single && client > 1 {
        let start = c.start()?;
        return Ok(c.outcome(start, vec![]));
    }
    c.run()
}

struct Client<'a> {
    ctx: &'a StepContext,
    kv: &'a KvSpec,
    store: &'a dyn KvStore,
    client: u32,
    mode: WriteMode,
}

impl Client<'_> {
    /// A generator seeded with seed + client, one stream per role.
    fn rng(&self, role: u64) -> SmallRng {
        SmallRng::seed_from_u64((self.ctx.spec.seed + self.client as u64) ^ (role << 56))
    }

    fn session(&self) -> Result<Box<dyn KvConn>> {
        self.store
            .session(self.mode)
            .map_err(|e| anyhow!("open a session: {e}"))
    }

    fn start(&self) -> Result<Instant> {
        self.ctx
            .ready_and_wait()
            .ok_or_else(|| anyhow!("stopped before the start"))
    }

    fn outcome(&self, end: Instant, histograms: Vec<Histograms>) -> ClientOutcome {
        ClientOutcome {
            table: format!("kv client {}", self.client),
            end,
            histograms,
            conns: vec![],
            rows: None,
            point_rows: (0, 0),
        }
    }

    fn deadline(&self, start: Instant) -> Stop {
        Stop::Deadline(self.ctx.spec.deadline(start, self.kv.duration()))
    }

    fn run(&self) -> Result<ClientOutcome> {
        let kv = self.kv;
        let (keys, step) = (kv.keys(), kv.step);
        let mut conn = self.session()?;
        let mut values = Values::new(kv.value_size, &mut self.rng(2));
        let start = self.start()?;
        let mut w = self.ctx.worker(self.client, start);
        let mut writer = Writer {
            conn: conn.as_mut(),
            key: Key::new(kv.key_size),
            values: &mut values,
            rng: self.rng(0),
        };
        let mut point_rows = (0, 0);
        let mut hists = vec![];
        match step {
            KvStep::Fillseq => {
                writer.run(&mut w, None, Pacing::ClosedLoop, Stop::Units(keys))?;
            }
            KvStep::Overwritesome => {
                let stop = Stop::Units(self.share_of_overwrites());
                writer.run(&mut w, Some(keys), Pacing::ClosedLoop, stop)?;
            }
            KvStep::Overwrite | KvStep::OverwriteAndWait => {
                let stop = self.deadline(start);
                writer.run(&mut w, Some(keys), Pacing::ClosedLoop, stop)?;
            }
            KvStep::FlushMtL0 => {
                self.timed(&mut w, OpKind::Flush, |s| s.flush())?;
                self.timed(&mut w, OpKind::Compact, |s| s.compact_l0())?;
            }
            _ => {
                drop(writer);
                let (p, h) = self.read_while_writing(&mut w, conn.as_mut(), &mut values)?;
                (point_rows, hists) = (p, h);
            }
        }
        if step == KvStep::OverwriteAndWait && self.ctx.last_to_arrive() {
            self.timed(&mut w, OpKind::Flush, |s| s.flush())?;
        }
        let end = self.ctx.now();
        self.ctx.stop_timing(self.client, end)?;
        if self.mode.disable_wal && read_kind(step).is_none() {
            // Without a WAL the writes live only in the memtable: persist them, untimed,
            // with the checks.
            self.store.flush().map_err(|e| anyhow!("flush: {e}"))?;
        }
        hists.push(w.finish());
        let mut o = self.outcome(end, hists);
        o.point_rows = point_rows;
        Ok(o)
    }

    /// This client's part of overwritesome's overwrite_fraction * keys overwrites.
    fn share_of_overwrites(&self) -> u64 {
        let kv = self.kv;
        let total = (kv.overwrite_fraction * kv.keys() as f64).ceil() as u64;
        let clients = self.ctx.spec.clients as u64;
        let i = self.client as u64 - 1;
        total / clients + u64::from(i < total % clients)
    }

    /// `f` on the store, then wait for compaction; timed as one `op`.
    fn timed(
        &self,
        w: &mut Worker,
        op: OpKind,
        f: impl FnOnce(&dyn KvStore) -> crate::driver::DbResult<()>,
    ) -> Result<()> {
        let stop = &self.ctx.stop;
        w.call(op, self.ctx.now(), || {
            f(self.store)?;
            self.store.wait_for_compaction(stop).map(|_| 0)
        })?;
        Ok(())
    }

    /// Readers as fast as they can for the duration; client 1 also runs the writer.
    fn read_while_writing(
        &self,
        w: &mut Worker,
        conn: &mut dyn KvConn,
        values: &mut Values,
    ) -> Result<((u64, u64), Vec<Histograms>)> {
        let kv = self.kv;
        let start = w.start();
        let stop = self.deadline(start);
        let reader = Reader {
            op: read_kind(kv.step).expect("a read step"),
            keys: kv.keys(),
            range_len: kv.range_len,
        };
        let writes = writer_rate(kv).filter(|_| self.client == 1);
        let Some(_) = writes else {
            let rows = reader.run(w, conn, &mut Key::new(kv.key_size), self.rng(1), stop, None)?;
            return Ok((rows, vec![]));
        };
        let mut wconn = self.session()?;
        let (rng, key_size) = (self.rng(0), kv.key_size);
        let entry = kv.entry_bytes() as u64;
        let bytes_per_s = kv.writer_bytes_per_s().round() as u64;
        if w.paced_by_window() {
            // A counting replay: the reader runs the writer's puts between its reads.
            let writer = Writer {
                conn: wconn.as_mut(),
                key: Key::new(key_size),
                values,
                rng,
            };
            let pacing = Pacing::rate(start, entry, bytes_per_s);
            let mut puts = InlinePuts::new(writer, kv.keys(), pacing, stop);
            let mut key = Key::new(key_size);
            let rows = reader.run(w, conn, &mut key, self.rng(1), stop, Some(&mut puts))?;
            return Ok((rows, vec![]));
        }
        std::thread::scope(|s| {
            let h = spawn_role(s, self.ctx, (self.client, "writer"), start, |ww| {
                let mut writer = Writer {
                    conn: wconn.as_mut(),
                    key: Key::new(key_size),
                    values,
                    rng,
                };
                let pacing = Pacing::rate(start, entry, bytes_per_s);
                writer.run(ww, Some(kv.keys()), pacing, stop)
            })?;
            let rows = reader.run(w, conn, &mut Key::new(key_size), self.rng(1), stop, None);
            let rows = self.ctx.guard(rows)?;
            let (_, hw) = join(h)?;
            Ok((rows, vec![hw]))
        })
    }
}
