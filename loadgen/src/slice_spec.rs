//! The spec's `slices` (slices.rs runs them): its own module, so the spec does not
//! depend on what running them needs.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// For measuring two builds alternately (with the handshake only, not with window):
/// the step runs in slices. After go, and after each slice once no driver call is in
/// flight, the loadgen prints 'slice' and waits for the line run on stdin; the step's
/// own clock (its duration, warm-up, paced writers, latencies, t_s, elapsed_s) stands
/// still meanwhile. Exactly one of ms and q_calls
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [{"required": ["ms"]}, {"required": ["q_calls"]}]))]
pub struct SliceSpec {
    /// A slice lasts this many milliseconds of the step's own time (for steps that run
    /// for a duration)
    #[schemars(range(min = 1))]
    pub ms: Option<u64>,
    /// A slice ends once this many calls of the step's Q operation began in it (for
    /// fixed-work steps; a step whose Q is one long call runs in one slice)
    #[schemars(range(min = 1))]
    pub q_calls: Option<u64>,
}

impl SliceSpec {
    pub fn validate(&self, handshake: bool) -> Result<()> {
        if !handshake {
            bail!("slices needs the handshake (handshake: true)");
        }
        match (self.ms, self.q_calls) {
            (Some(_), Some(_)) => bail!("slices takes one of ms and q_calls, not both"),
            (None, None) => bail!(
                "slices needs one of ms (a slice's length, milliseconds) and q_calls \
                 (Q calls per slice)"
            ),
            (Some(0), _) => bail!("slices.ms must be at least 1"),
            (_, Some(0)) => bail!("slices.q_calls must be at least 1"),
            _ => Ok(()),
        }
    }

    /// A slice's length in own time, when slices are timed.
    pub fn length(&self) -> Option<Duration> {
        self.ms.map(Duration::from_millis)
    }
}
