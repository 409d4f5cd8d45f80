//! db_bench-style steps (METHOD.md section 4) over driver::kv. Each client thread takes
//! a session; fillseq and flush_mt_l0 run on client 1 alone; in the *whilewriting steps
//! client 1 also runs the one background writer, paced in bytes per second.

use super::kv_data::{Key, Values};
use super::kv_loops::{Reader, Writer};
use super::roles::{join, spawn_role};
use crate::context::{StepContext, Worker};
use crate::driver::kv::{KvConn, KvStore, WriteMode};
use crate::outcome::{ClientOutcome, Histograms, StepPlan};
use crate::output::QUnit;
use crate::pace::{Pacing, Stop};
use crate::spec::{EngineSpec, StepSpec};
use crate::stats::OpKind;
use crate::step::Step;
use anyhow::{anyhow, Result};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::time::Instant;

/// The reader's op kind of a read step, None for write steps.
fn read_kind(step: Step) -> Option<OpKind> {
    match step {
        Step::Readrandom | Step::ReadWhileWriting => Some(OpKind::Get),
        Step::Fwdrange | Step::FwdrangeWhileWriting => Some(OpKind::SeekNext),
        Step::Revrange | Step::RevrangeWhileWriting => Some(OpKind::SeekPrev),
        _ => None,
    }
}

fn while_writing(step: Step) -> bool {
    matches!(
        step,
        Step::ReadWhileWriting | Step::FwdrangeWhileWriting | Step::RevrangeWhileWriting
    )
}

/// The background writer's target in puts/s, None when it does not run.
fn writer_rate(spec: &StepSpec) -> Option<f64> {
    let bytes = spec.kv.writer_bytes_per_s();
    (while_writing(spec.step) && bytes > 0.0).then(|| bytes / spec.kv.entry_bytes() as f64)
}

pub fn plan(spec: &StepSpec) -> StepPlan {
    let (q_op, kinds) = match (spec.step, read_kind(spec.step)) {
        (_, Some(read)) if writer_rate(spec).is_some() => (read, vec![read, OpKind::Put]),
        (_, Some(read)) => (read, vec![read]),
        (Step::FlushMtL0, _) => (OpKind::Compact, vec![OpKind::Flush, OpKind::Compact]),
        (Step::OverwriteAndWait, _) => (OpKind::Put, vec![OpKind::Put, OpKind::Flush]),
        _ => (OpKind::Put, vec![OpKind::Put]),
    };
    let targets = writer_rate(spec)
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
pub fn run_client(ctx: &StepContext, client: u32) -> Result<ClientOutcome> {
    let spec = &ctx.spec;
    let store = ctx
        .driver
        .kv()
        .ok_or_else(|| anyhow!("driver {} has no key-value store", ctx.driver.name()))?;
    let sync = matches!(&spec.engine, EngineSpec::Rocksdb { options, .. } if options.sync);
    let mode = WriteMode {
        disable_wal: spec.kv.disable_wal(spec.step),
        sync,
    };
    let c = Client {
        ctx,
        store,
        client,
        mode,
    };
    let single = matches!(spec.step, Step::Fillseq | Step::FlushMtL0);
    if single && client > 1 {
        let start = c.start()?;
        return Ok(c.outcome(start, vec![]));
    }
    c.run()
}

struct Client<'a> {
    ctx: &'a StepContext,
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
        let spec = &self.ctx.spec;
        Stop::Deadline(spec.deadline(start, spec.kv.duration()))
    }

    fn run(&self) -> Result<ClientOutcome> {
        let spec = &self.ctx.spec;
        let (keys, step) = (spec.kv.keys(), spec.step);
        let mut conn = self.session()?;
        let mut values = Values::new(spec.kv.value_size, &mut self.rng(2));
        let start = self.start()?;
        let mut w = self.ctx.worker(self.client, start);
        let mut writer = Writer {
            conn: conn.as_mut(),
            key: Key::new(spec.kv.key_size),
            values: &mut values,
            rng: self.rng(0),
        };
        let mut point_rows = (0, 0);
        let mut hists = vec![];
        match step {
            Step::Fillseq => {
                writer.run(&mut w, None, Pacing::ClosedLoop, Stop::Units(keys))?;
            }
            Step::Overwritesome => {
                let stop = Stop::Units(self.share_of_overwrites());
                writer.run(&mut w, Some(keys), Pacing::ClosedLoop, stop)?;
            }
            Step::Overwrite | Step::OverwriteAndWait => {
                let stop = self.deadline(start);
                writer.run(&mut w, Some(keys), Pacing::ClosedLoop, stop)?;
            }
            Step::FlushMtL0 => {
                self.timed(&mut w, OpKind::Flush, |s| s.flush())?;
                self.timed(&mut w, OpKind::Compact, |s| s.compact_l0())?;
            }
            _ => {
                drop(writer);
                let (p, h) = self.read_while_writing(&mut w, conn.as_mut(), &mut values)?;
                (point_rows, hists) = (p, h);
            }
        }
        if step == Step::OverwriteAndWait && self.ctx.last_to_arrive() {
            self.timed(&mut w, OpKind::Flush, |s| s.flush())?;
        }
        let end = Instant::now();
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
        let kv = &self.ctx.spec.kv;
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
        w.call(op, Instant::now(), || {
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
        let spec = &self.ctx.spec;
        let start = w.start();
        let stop = self.deadline(start);
        let reader = Reader {
            op: read_kind(spec.step).expect("a read step"),
            keys: spec.kv.keys(),
            range_len: spec.kv.range_len,
        };
        let writes = writer_rate(spec).filter(|_| self.client == 1);
        let Some(_) = writes else {
            let rows = reader.run(w, conn, &mut Key::new(spec.kv.key_size), self.rng(1), stop)?;
            return Ok((rows, vec![]));
        };
        let mut wconn = self.session()?;
        let (rng, key_size) = (self.rng(0), spec.kv.key_size);
        let entry = spec.kv.entry_bytes() as u64;
        let bytes_per_s = spec.kv.writer_bytes_per_s().round() as u64;
        std::thread::scope(|s| {
            let h = spawn_role(s, self.ctx, (self.client, "writer"), start, |ww| {
                let mut writer = Writer {
                    conn: wconn.as_mut(),
                    key: Key::new(key_size),
                    values,
                    rng,
                };
                let pacing = Pacing::rate(start, entry, bytes_per_s);
                writer.run(ww, Some(spec.kv.keys()), pacing, stop)
            })?;
            let rows = reader.run(w, conn, &mut Key::new(key_size), self.rng(1), stop);
            let rows = self.ctx.guard(rows)?;
            let (_, hw) = join(h)?;
            Ok((rows, vec![hw]))
        })
    }
}
