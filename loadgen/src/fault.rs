//! Fault injection for tests: `DBREGRESS_LOADGEN_FAULT`, read once at start.
//!
//! `panic:client=<i>:after_ops=<n>` makes client i (1-based) panic once it has
//! completed n timed operations over all of its threads (n = 0: as its timed part
//! begins). Unset or empty, nothing happens; a worker then pays one branch per
//! operation on a value computed when it was made.

use anyhow::{anyhow, bail, Result};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const VAR: &str = "DBREGRESS_LOADGEN_FAULT";
pub const FORMAT: &str = "panic:client=<i>:after_ops=<n>";

/// An injected panic in one client.
#[derive(Debug)]
pub struct Fault {
    /// The client (1-based) that panics.
    pub client: u32,
    pub after_ops: u64,
    /// Timed operations client `client` has completed so far.
    done: AtomicU64,
}

impl Fault {
    /// The fault `DBREGRESS_LOADGEN_FAULT` asks for; None when it is unset or empty.
    pub fn from_env() -> Result<Option<Fault>> {
        match std::env::var_os(VAR) {
            None => Ok(None),
            Some(v) if v.is_empty() => Ok(None),
            Some(v) => {
                let v = v.into_string().map_err(|v| {
                    anyhow!("{VAR}={v:?} is not UTF-8; the accepted format is {FORMAT}")
                })?;
                Fault::parse(&v).map(Some)
            }
        }
    }

    /// Parse a value of `DBREGRESS_LOADGEN_FAULT`.
    pub fn parse(value: &str) -> Result<Fault> {
        let parsed = (|| {
            let rest = value.strip_prefix("panic:client=")?;
            let (client, after) = rest.split_once(":after_ops=")?;
            let client: u32 = number(client)?;
            let after_ops: u64 = number(after)?;
            (client >= 1).then_some(Fault {
                client,
                after_ops,
                done: AtomicU64::new(0),
            })
        })();
        parsed.ok_or_else(|| {
            anyhow!(
                "{VAR}={value:?} is not a fault this loadgen knows; the accepted format is \
                 {FORMAT} (client i from 1, n from 0), or leave it unset"
            )
        })
    }

    /// The client must exist in a step of `clients` clients.
    pub fn check_clients(&self, clients: u32) -> Result<()> {
        if self.client > clients {
            bail!(
                "{VAR} names client {}, but the step has {clients} client(s)",
                self.client
            );
        }
        Ok(())
    }

    /// This fault, if it is client `client`'s.
    pub fn of_client(fault: Option<&Fault>, client: u32) -> Option<&Fault> {
        fault.filter(|f| f.client == client)
    }

    /// The client's timed part begins: with `after_ops=0`, that is the moment.
    pub fn begin(&self) {
        if self.after_ops == 0 {
            self.fire();
        }
    }

    /// The client completed one more timed operation.
    #[cold]
    pub fn op_done(&self) {
        if self.done.fetch_add(1, Relaxed) + 1 == self.after_ops {
            self.fire();
        }
    }

    fn fire(&self) -> ! {
        panic!(
            "injected fault: panic in client {} after {} ops",
            self.client, self.after_ops
        );
    }
}

/// A decimal number, digits only (no sign, no spaces).
fn number<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accepted_format_parses() {
        let f = Fault::parse("panic:client=2:after_ops=100").unwrap();
        assert_eq!((f.client, f.after_ops), (2, 100));
        let f = Fault::parse("panic:client=1:after_ops=0").unwrap();
        assert_eq!((f.client, f.after_ops), (1, 0));
        assert!(f.check_clients(1).is_ok());
        let e = Fault::parse("panic:client=3:after_ops=1")
            .unwrap()
            .check_clients(2)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "DBREGRESS_LOADGEN_FAULT names client 3, but the step has 2 client(s)"
        );
    }

    #[test]
    fn anything_else_is_an_error_naming_the_variable_and_the_format() {
        for bad in [
            "panic",
            "crash:client=1:after_ops=1",
            "panic:client=0:after_ops=1",
            "panic:client=-1:after_ops=1",
            "panic:client=+1:after_ops=1",
            "panic:client=1:after_ops=",
            "panic:client=:after_ops=1",
            "panic:client=1:after_ops=1:extra",
            "panic:client=1:after_ops=x",
            "panic:client=1 :after_ops=1",
            "panic:after_ops=1:client=1",
            "panic:client=99999999999:after_ops=1",
            "panic:client=1:after_ops=99999999999999999999999",
            "PANIC:client=1:after_ops=1",
        ] {
            let e = Fault::parse(bad).unwrap_err().to_string();
            assert!(e.contains(VAR), "{bad}: {e}");
            assert!(e.contains(FORMAT), "{bad}: {e}");
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn it_fires_on_the_nth_operation_only() {
        let f = Fault::parse("panic:client=1:after_ops=3").unwrap();
        f.begin();
        f.op_done();
        f.op_done();
        let e = std::panic::catch_unwind(|| f.op_done()).unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert_eq!(msg, "injected fault: panic in client 1 after 3 ops");
        f.op_done(); // past n: once is enough
        let zero = Fault::parse("panic:client=1:after_ops=0").unwrap();
        assert!(std::panic::catch_unwind(|| zero.begin()).is_err());
        assert!(Fault::of_client(Some(&f), 2).is_none());
        assert!(Fault::of_client(Some(&f), 1).is_some());
    }
}
