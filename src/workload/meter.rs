//! The memory a read of an object keeps in lists, counted as the lists grow and checked
//! against an allowance, so that a server can bound what a review holds and not only its body.
//!
//! A pod spec's lists (containers, env, volumes, mounts, …) are read into entries many times
//! the size of their JSON: `{"name":"a"},` is 13 bytes and a lean container 176, so a 3.5 MiB
//! review of bare containers grew the server by 96 MiB. Each list charges its buffer's growth
//! to the [`Meter`] in scope ([`metered`]); outside a scope nothing is counted. Once the meter
//! refuses, the read fails, every later charge fails too, and the meter says why.

use std::cell::RefCell;

/// Why a meter refused more memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// More than one review may ever hold.
    #[error("reading the object would keep more than {} in memory", in_units(*limit))]
    TooLarge {
        /// The most one review may hold.
        limit: usize,
    },
    /// The memory is held by other reviews now.
    #[error("the memory for reading the object is held by other reviews")]
    Busy,
}

/// `bytes` as a person reads it: whole KiB or MiB when it is a whole number of them.
fn in_units(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    match bytes {
        0 => "0 bytes".to_owned(),
        b if b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b % KIB == 0 => format!("{} KiB", b / KIB),
        b => format!("{b} bytes"),
    }
}

/// Where memory beyond a meter's free part comes from.
pub trait Allowance: Send {
    /// Grants `bytes` more, or says why not.
    fn grant(&mut self, bytes: usize) -> Result<(), Refusal>;
}

/// Grants nothing more: a meter with this refuses past its free part.
#[derive(Debug, Clone, Copy)]
pub struct Nothing;

impl Allowance for Nothing {
    fn grant(&mut self, _: usize) -> Result<(), Refusal> {
        Err(Refusal::TooLarge { limit: 0 })
    }
}

/// Smallest grant asked for at once; asks grow with what was granted, so a read asks a few
/// times, not once per list.
const SMALLEST_ASK: usize = 64 * 1024;

/// A count of the memory kept, with `free` bytes that need no grant.
pub struct Meter {
    free: usize,
    used: usize,
    granted: usize,
    more: Box<dyn Allowance>,
    refused: Option<Refusal>,
}

impl Meter {
    /// A meter whose first `free` bytes are granted, and the rest asked of `more`.
    pub fn new(free: usize, more: impl Allowance + 'static) -> Self {
        Self {
            free,
            used: 0,
            granted: 0,
            more: Box::new(more),
            refused: None,
        }
    }

    /// Bytes counted so far.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Why the meter refused, if it did.
    pub fn refused(&self) -> Option<Refusal> {
        self.refused
    }

    fn charge(&mut self, bytes: usize) -> Result<(), Refusal> {
        if let Some(refusal) = self.refused {
            return Err(refusal);
        }
        self.used = self.used.saturating_add(bytes);
        let covered = self.free.saturating_add(self.granted);
        if self.used <= covered {
            return Ok(());
        }
        let ask = (self.used - covered).max(SMALLEST_ASK).max(self.granted);
        match self.more.grant(ask) {
            Ok(()) => {
                self.granted = self.granted.saturating_add(ask);
                Ok(())
            }
            Err(refusal) => {
                self.refused = Some(refusal);
                Err(refusal)
            }
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// Runs `read` with `meter` counting what it keeps (a panic in `read` still gives the meter
/// back). Reads nest: the inner meter counts while it is in scope.
pub fn metered<T>(meter: &mut Meter, read: impl FnOnce() -> T) -> T {
    struct Restore<'m> {
        meter: &'m mut Meter,
        outer: Option<Meter>,
    }
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let outer = self.outer.take();
            if let Some(inner) = CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer)) {
                *self.meter = inner;
            }
        }
    }
    let inner = std::mem::replace(meter, Meter::new(0, Nothing));
    let outer = CURRENT.with(|c| c.borrow_mut().replace(inner));
    let _restore = Restore { meter, outer };
    read()
}

/// Counts `bytes` kept by the read in scope; an error once the meter refuses.
pub fn charge(bytes: usize) -> Result<(), Refusal> {
    CURRENT.with(|c| match c.borrow_mut().as_mut() {
        Some(meter) => meter.charge(bytes),
        None => Ok(()),
    })
}

/// Whether the meter in scope has refused: a read it stopped is not tried again another way.
pub fn has_refused() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(|m| m.refused.is_some()))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Grants up to `left` bytes and records every ask.
    struct Pool {
        left: usize,
        asks: Arc<Mutex<Vec<usize>>>,
    }

    impl Allowance for Pool {
        fn grant(&mut self, bytes: usize) -> Result<(), Refusal> {
            self.asks.lock().unwrap().push(bytes);
            if bytes > self.left {
                return Err(Refusal::Busy);
            }
            self.left -= bytes;
            Ok(())
        }
    }

    #[test]
    fn a_refusal_names_its_limit_as_a_person_reads_it() {
        let words = |limit| Refusal::TooLarge { limit }.to_string();
        assert_eq!(
            words(45 * 1024 * 1024),
            "reading the object would keep more than 45 MiB in memory"
        );
        assert!(words(1536).ends_with("more than 1536 bytes in memory"));
        assert!(words(512 * 1024).ends_with("more than 512 KiB in memory"));
        assert!(words(0).ends_with("more than 0 bytes in memory"));
    }

    #[test]
    fn charges_count_only_inside_a_scope() {
        assert_eq!(charge(usize::MAX), Ok(()));
        let mut meter = Meter::new(100, Nothing);
        metered(&mut meter, || {
            assert_eq!(charge(60), Ok(()));
            assert_eq!(charge(40), Ok(()));
        });
        assert_eq!(meter.used(), 100);
        assert_eq!(meter.refused(), None);
        assert_eq!(charge(usize::MAX), Ok(()), "the scope ended");
    }

    #[test]
    fn past_the_free_part_grants_are_asked_in_growing_steps_until_refused() {
        let asks = Arc::new(Mutex::new(Vec::new()));
        let pool = Pool {
            left: 200 * 1024,
            asks: asks.clone(),
        };
        let mut meter = Meter::new(1000, pool);
        metered(&mut meter, || {
            assert_eq!(charge(1000), Ok(()));
            assert_eq!(charge(1), Ok(()));
            assert_eq!(charge(64 * 1024), Ok(()));
            assert_eq!(charge(100 * 1024), Err(Refusal::Busy));
            assert!(has_refused());
            assert_eq!(charge(1), Err(Refusal::Busy), "refused for good");
        });
        assert_eq!(*asks.lock().unwrap(), [64 * 1024, 64 * 1024, 128 * 1024]);
        assert_eq!(meter.refused(), Some(Refusal::Busy));
        assert!(!has_refused(), "the scope ended");
    }

    #[test]
    fn a_panicking_read_gives_the_meter_back() {
        let mut meter = Meter::new(10, Nothing);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            metered(&mut meter, || {
                charge(5).unwrap();
                panic!("boom");
            })
        }));
        assert!(caught.is_err());
        assert_eq!(meter.used(), 5);
        assert_eq!(charge(usize::MAX), Ok(()), "no meter left in scope");
    }

    #[test]
    fn an_inner_scope_counts_alone_and_the_outer_one_resumes() {
        let mut outer = Meter::new(100, Nothing);
        let mut inner = Meter::new(100, Nothing);
        metered(&mut outer, || {
            charge(10).unwrap();
            metered(&mut inner, || charge(20).unwrap());
            charge(30).unwrap();
        });
        assert_eq!((outer.used(), inner.used()), (40, 20));
    }
}
