//! The microbenchmarks (docs/lab-file.md, The micro benchmark): sysbench-style steps on tables
//! sbtest1..sbtestN, `clients` connections in a closed loop for `micro.duration_s`.
//! Client 1 surveys the tables before the start (are ids 1..=rows all there, how many
//! rows, the largest id) so the step can check what it read and wrote.

use super::micro_gen;
use super::micro_ops::{self, OpRunner};
use crate::context::StepContext;
use crate::driver::micro::{MicroConn, SbRow, Table};
use crate::driver::{Conn, DbResult};
use crate::micro_spec::{MicroSpec, MicroStep};
use crate::outcome::{ClientOutcome, Histograms, RowCheck, StepPlan};
use crate::output::QUnit;
use crate::stats::OpKind;
use anyhow::{anyhow, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::OnceLock;
use std::time::Instant;

/// Rows per insert statement of the load step.
const LOAD_BATCH: u64 = 1000;

/// What client 1 found before the start; every client reads it after the start gate
/// (which orders it after the write). One step per process, so one survey.
struct Survey {
    /// Every id 1..=rows exists in every table, so point lookups must find their rows.
    intact: bool,
    rows_before: u64,
    max_id: i64,
}

static SURVEY: OnceLock<Survey> = OnceLock::new();

pub fn table_name(n: u32) -> String {
    format!("sbtest{n}")
}

pub fn plan(ms: &MicroSpec) -> StepPlan {
    let (q_op, q_unit, kinds) = match ms.step {
        MicroStep::Load => (
            OpKind::Insert,
            QUnit::Rows,
            vec![OpKind::Insert, OpKind::CreateIndex],
        ),
        MicroStep::Cleanup => (OpKind::Cleanup, QUnit::Ops, vec![OpKind::Cleanup]),
        s => {
            let k = micro_ops::op_kind(s);
            (k, QUnit::Ops, vec![k])
        }
    };
    StepPlan {
        kinds,
        q_op,
        q_unit,
        targets: vec![],
    }
}

pub fn run_client(ctx: &StepContext, ms: &MicroSpec, client: u32) -> Result<ClientOutcome> {
    let c = Client { ctx, ms, client };
    match ms.step {
        MicroStep::Load => c.load(),
        MicroStep::Cleanup => c.cleanup(),
        step => c.timed(step),
    }
}

/// Turn a set-up failure into an error naming what and where.
fn setup<T>(what: &str, table: &str, r: DbResult<T>) -> Result<T> {
    r.map_err(|e| anyhow!("{what} {table}: {}", e.message))
}

fn micro<'c>(ctx: &StepContext, conn: &'c mut dyn Conn) -> Result<&'c mut dyn MicroConn> {
    let name = ctx.driver.name();
    conn.micro()
        .ok_or_else(|| anyhow!("driver {name} does not run the microbenchmarks"))
}

fn table(slot: usize, name: &str) -> Table<'_> {
    Table { slot, name }
}

struct Client<'a> {
    ctx: &'a StepContext,
    ms: &'a MicroSpec,
    client: u32,
}

impl Client<'_> {
    fn rng(&self, role: u64) -> SmallRng {
        SmallRng::seed_from_u64((self.ctx.spec.seed + self.client as u64) ^ (role << 56))
    }

    /// The tables this client loads or cleans: every `clients`-th from its number.
    fn own_tables(&self) -> Vec<u32> {
        let step = self.ctx.spec.clients as usize;
        (self.client..=self.ms.tables).step_by(step).collect()
    }

    fn start(&self) -> Result<Instant> {
        self.ctx
            .ready_and_wait()
            .ok_or_else(|| anyhow!("stopped before the start"))
    }

    fn outcome(&self, end: Instant, hists: Vec<Histograms>, conn: Box<dyn Conn>) -> ClientOutcome {
        ClientOutcome {
            table: format!("sbtest1..{}", self.ms.tables),
            end,
            histograms: hists,
            conns: vec![conn],
            rows: None,
            point_rows: (0, 0),
        }
    }

    /// Rows in all the tables.
    fn count_all(&self, m: &mut dyn MicroConn) -> Result<u64> {
        let mut n = 0;
        for t in 1..=self.ms.tables {
            let name = table_name(t);
            let t = table(t as usize - 1, &name);
            n += setup("count rows of", &name, m.count_ids(t, i64::MIN, i64::MAX))?;
        }
        Ok(n)
    }

    /// load: create this client's tables, fill them in id order, then index k.
    fn load(&self) -> Result<ClientOutcome> {
        let rows = self.ms.rows;
        let mut conn = self.ctx.connect()?;
        let m = micro(self.ctx, conn.as_mut())?;
        let mine = self.own_tables();
        for &n in &mine {
            let name = table_name(n);
            setup(
                "create table",
                &name,
                m.create_sbtest(table(n as usize - 1, &name)),
            )?;
        }
        let start = self.start()?;
        let mut w = self.ctx.worker(self.client, start);
        let mut rng = self.rng(0);
        let mut batch: Vec<SbRow> = Vec::new();
        let mut inserted = 0;
        for &n in &mine {
            let name = table_name(n);
            let t = table(n as usize - 1, &name);
            let mut id = 1;
            while id <= rows && !w.stopped() {
                let count = LOAD_BATCH.min(rows - id + 1) as usize;
                fill_rows(&mut rng, &mut batch, id as i64, count, rows);
                let rows_now = &batch[..count];
                let (r, _) = w.call(OpKind::Insert, self.ctx.now(), || {
                    m.insert_sbtest(t, rows_now)
                })?;
                if let Some(r) = r {
                    inserted += r;
                    id += count as u64; // after an ignorable error, retry the batch
                }
            }
            let index = format!("k_{n}");
            w.call(OpKind::CreateIndex, self.ctx.now(), || {
                m.create_k_index(t, &index).map(|_| rows)
            })?;
        }
        let end = self.ctx.now();
        self.ctx.stop_timing(self.client, end)?;
        let mut found = 0;
        for &n in &mine {
            let name = table_name(n);
            let t = table(n as usize - 1, &name);
            found += setup("count rows of", &name, m.count_ids(t, i64::MIN, i64::MAX))?;
        }
        let mut o = self.outcome(end, vec![w.finish()], conn);
        o.rows = (!mine.is_empty()).then_some(RowCheck {
            before: 0,
            inserted,
            deleted: 0,
            found,
        });
        Ok(o)
    }

    /// cleanup: each of this client's tables, then the engine once, by the last client.
    fn cleanup(&self) -> Result<ClientOutcome> {
        let mut conn = self.ctx.connect()?;
        let start = self.start()?;
        let mut w = self.ctx.worker(self.client, start);
        let timeout = self.ms.cleanup_timeout();
        for n in self.own_tables() {
            let name = table_name(n);
            let t = table(n as usize - 1, &name);
            w.call(OpKind::Cleanup, self.ctx.now(), || {
                conn.cleanup_table(t, timeout).map(|_| 0)
            })?;
        }
        if self.ctx.last_to_arrive() {
            w.call(OpKind::Cleanup, self.ctx.now(), || {
                conn.cleanup_engine(timeout).map(|_| 0)
            })?;
        }
        Ok(self.outcome(self.ctx.now(), vec![w.finish()], conn))
    }

    /// What the checks of `step` need to know before it starts.
    fn survey(&self, m: &mut dyn MicroConn, step: MicroStep) -> Result<Survey> {
        let ms = self.ms;
        let mut s = Survey {
            intact: false,
            rows_before: 0,
            max_id: 0,
        };
        if micro_ops::expected_rows(step).is_some() {
            s.intact = true;
            for n in 1..=ms.tables {
                let name = table_name(n);
                let t = table(n as usize - 1, &name);
                let live = setup("count rows of", &name, m.count_ids(t, 1, ms.rows as i64))?;
                s.intact &= live == ms.rows;
            }
        }
        if matches!(step, MicroStep::Delete | MicroStep::Insert) {
            s.rows_before = self.count_all(m)?;
            for n in 1..=ms.tables {
                let name = table_name(n);
                let t = table(n as usize - 1, &name);
                let max = setup("read the largest id of", &name, m.max_id(t))?;
                s.max_id = s.max_id.max(max);
            }
        }
        Ok(s)
    }

    /// A timed step: operations back to back until the deadline.
    fn timed(&self, step: MicroStep) -> Result<ClientOutcome> {
        let (spec, ms) = (&self.ctx.spec, self.ms);
        let mut conn = self.ctx.connect()?;
        let m = micro(self.ctx, conn.as_mut())?;
        if self.client == 1 {
            let _ = SURVEY.set(self.survey(m, step)?);
        }
        let tables = (1..=ms.tables).map(table_name).collect();
        let start = self.start()?;
        let survey = SURVEY
            .get()
            .ok_or_else(|| anyhow!("client 1 did not survey the tables"))?;
        let ids = (survey.max_id + self.client as i64, spec.clients as i64);
        let mut ops = OpRunner::new(step, tables, (ms.rows, ms.range_size), self.rng(1), ids);
        let kind = micro_ops::op_kind(step);
        let want = micro_ops::expected_rows(step).filter(|_| survey.intact);
        let deadline = spec.deadline(start, ms.duration());
        let mut w = self.ctx.worker(self.client, start);
        let (mut expected, mut found) = (0, 0);
        let mut now = self.ctx.now();
        while now < deadline && !w.stopped() {
            let (rows, done) = w.call(kind, now, || ops.run(m))?;
            if let (Some(want), Some(got)) = (want, rows) {
                expected += want;
                found += got;
            }
            now = done;
        }
        let counts = matches!(step, MicroStep::Delete | MicroStep::Insert);
        let last = counts && self.ctx.last_to_arrive();
        self.ctx.stop_timing(self.client, now)?;
        let mut check = None;
        if last {
            // Past the check gate every client's timed part has ended: the totals
            // (warm-up included, as the table's rows are) are final.
            let totals = self.ctx.stats.totals();
            check = Some(RowCheck {
                before: survey.rows_before,
                inserted: totals[OpKind::Insert as usize].rows,
                deleted: totals[OpKind::Delete as usize].rows,
                found: self.count_all(m)?,
            });
        }
        let mut o = self.outcome(now, vec![w.finish()], conn);
        o.point_rows = (expected, found);
        o.rows = check;
        Ok(o)
    }
}

/// Rows `first..first+count` of the load, k uniform in 1..=rows, as sysbench's prepare.
fn fill_rows(rng: &mut SmallRng, batch: &mut Vec<SbRow>, first: i64, count: usize, rows: u64) {
    while batch.len() < count {
        batch.push(SbRow {
            id: 0,
            k: 0,
            c: String::with_capacity(120),
            pad: String::with_capacity(60),
        });
    }
    for (i, r) in batch[..count].iter_mut().enumerate() {
        r.id = first + i as i64;
        r.k = rng.gen_range(1..=rows as i64);
        micro_gen::fill_c(rng, &mut r.c);
        micro_gen::fill_pad(rng, &mut r.pad);
    }
}
