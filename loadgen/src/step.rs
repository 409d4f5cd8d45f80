//! The step spec's names: which workload, and which step of it (schema/step-spec.schema.json
//! `workload` and `step`), with what each step is. The workloads' own sections
//! (insert_spec, kvspec, micro_spec) and spec.rs, which composes them, build on these.

use crate::micro_spec::MicroStep;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Insert,
    Kv,
    Micro,
}

// No doc comments on the serialized variants below (nor on MicroStep's): schemars would
// turn the schema's plain `enum` of names into a `oneOf` of described constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum Step {
    #[serde(rename = "l.i0")]
    LoadI0,
    #[serde(rename = "l.x")]
    CreateIndexes,
    #[serde(rename = "l.i1")]
    LoadI1,
    #[serde(rename = "l.i2")]
    LoadI2,
    #[serde(rename = "cleanup")]
    Cleanup,
    #[serde(rename = "qr")]
    RangeQueries,
    #[serde(rename = "qp")]
    PointQueries,
    /// The microbenchmarks' steps (workload micro; it shares `cleanup` above), read
    /// by `step_or_micro`.
    #[serde(skip)]
    Micro(MicroStep),
    #[serde(rename = "fillseq")]
    Fillseq,
    #[serde(rename = "revrange")]
    Revrange,
    #[serde(rename = "overwritesome")]
    Overwritesome,
    #[serde(rename = "flush_mt_l0")]
    FlushMtL0,
    #[serde(rename = "readrandom")]
    Readrandom,
    #[serde(rename = "fwdrange")]
    Fwdrange,
    #[serde(rename = "revrangewhilewriting")]
    RevrangeWhileWriting,
    #[serde(rename = "fwdrangewhilewriting")]
    FwdrangeWhileWriting,
    #[serde(rename = "readwhilewriting")]
    ReadWhileWriting,
    #[serde(rename = "overwriteandwait")]
    OverwriteAndWait,
    #[serde(rename = "overwrite")]
    Overwrite,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Insert => "insert",
            Workload::Kv => "kv",
            Workload::Micro => "micro",
        }
    }
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::LoadI0 => "l.i0",
            Step::CreateIndexes => "l.x",
            Step::LoadI1 => "l.i1",
            Step::LoadI2 => "l.i2",
            Step::Cleanup => "cleanup",
            Step::RangeQueries => "qr",
            Step::PointQueries => "qp",
            Step::Micro(m) => m.name(),
            Step::Fillseq => "fillseq",
            Step::Revrange => "revrange",
            Step::Overwritesome => "overwritesome",
            Step::FlushMtL0 => "flush_mt_l0",
            Step::Readrandom => "readrandom",
            Step::Fwdrange => "fwdrange",
            Step::RevrangeWhileWriting => "revrangewhilewriting",
            Step::FwdrangeWhileWriting => "fwdrangewhilewriting",
            Step::ReadWhileWriting => "readwhilewriting",
            Step::OverwriteAndWait => "overwriteandwait",
            Step::Overwrite => "overwrite",
        }
    }

    /// The workload a step belongs to.
    pub fn workload(self) -> Workload {
        match self {
            Step::LoadI0
            | Step::CreateIndexes
            | Step::LoadI1
            | Step::LoadI2
            | Step::Cleanup
            | Step::RangeQueries
            | Step::PointQueries => Workload::Insert,
            Step::Micro(_) => Workload::Micro,
            _ => Workload::Kv,
        }
    }

    /// kv steps that run for kv.duration_s.
    pub fn is_timed_kv(self) -> bool {
        matches!(
            self,
            Step::Revrange
                | Step::Readrandom
                | Step::Fwdrange
                | Step::RevrangeWhileWriting
                | Step::FwdrangeWhileWriting
                | Step::ReadWhileWriting
                | Step::OverwriteAndWait
                | Step::Overwrite
        )
    }

    pub fn is_load(self) -> bool {
        matches!(self, Step::LoadI0 | Step::LoadI1 | Step::LoadI2)
    }

    /// l.i1, l.i2: an inserter with a deleter behind it.
    pub fn deletes_behind(self) -> bool {
        matches!(self, Step::LoadI1 | Step::LoadI2)
    }

    pub fn is_query(self) -> bool {
        matches!(self, Step::RangeQueries | Step::PointQueries)
    }

    /// Steps that run for a duration, rather than until a fixed amount of work is done:
    /// the only ones a warm-up applies to.
    pub fn runs_for_a_duration(self) -> bool {
        let micro_timed = matches!(self, Step::Micro(m) if m != MicroStep::Load);
        self.is_query() || self.is_timed_kv() || micro_timed
    }

    /// Rows per insert statement and commit when the spec does not say.
    pub fn default_rows_per_commit(self) -> Option<u64> {
        match self {
            Step::LoadI0 => Some(100),
            Step::LoadI1 => Some(50),
            Step::LoadI2 => Some(5),
            Step::RangeQueries | Step::PointQueries => Some(10),
            _ => None,
        }
    }
}

/// A step of the enum above, else a micro step; the error names the unknown step.
pub fn step_or_micro<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Step, D::Error> {
    use serde::de::{value::StrDeserializer, Error, IntoDeserializer};
    let name = String::deserialize(d)?;
    let de: StrDeserializer<'_, serde::de::value::Error> = name.as_str().into_deserializer();
    match Step::deserialize(de) {
        Ok(step) => Ok(step),
        Err(e) => {
            let de: StrDeserializer<'_, D::Error> = name.as_str().into_deserializer();
            MicroStep::deserialize(de)
                .map(Step::Micro)
                .map_err(|_| D::Error::custom(format!("{e}, or a micro step")))
        }
    }
}

/// The schema of what `step_or_micro` reads: the names of the enum above, then the micro
/// steps' names.
pub fn step_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut names = Vec::new();
    for schema in [
        Step::json_schema(generator),
        MicroStep::json_schema(generator),
    ] {
        names_in(schema.as_value(), &mut names);
    }
    schemars::json_schema!({"type": "string", "enum": names})
}

/// The names a unit-variant enum's schema lists: an `enum` (`Step`'s skipped variant makes
/// schemars wrap it in a `oneOf`).
fn names_in(schema: &serde_json::Value, names: &mut Vec<serde_json::Value>) {
    if let Some(listed) = schema.get("enum").and_then(|e| e.as_array()) {
        names.extend(listed.iter().cloned());
    }
    if let Some(one_of) = schema.get("oneOf").and_then(|e| e.as_array()) {
        one_of.iter().for_each(|s| names_in(s, names));
    }
}
