//! Bounds on what clients can make the server hold: open connections, and the memory of the
//! reviews in flight (their bodies and what is read from them). Both are semaphores.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::workload::meter::{Allowance, Meter, Refusal};

/// The most open connections (TLS handshakes included); further clients wait in the kernel's
/// accept queue.
#[derive(Debug, Clone)]
pub struct ConnectionLimit {
    slots: Arc<Semaphore>,
    max: usize,
}

impl ConnectionLimit {
    /// A limit of `max` connections (at least one).
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// Waits for a free slot, held until the connection closes (`None` never happens: nothing
    /// closes the semaphore).
    pub async fn acquire(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().acquire_owned().await.ok()
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// The most memory the reviews in flight hold at once, reserved up front
/// ([`BodyBudget::reserve_review`]) so no review holds part of it while waiting for more. A
/// quarter is kept for bodies of at most [`SMALL_BODY`] (real reviews are a few KiB): large
/// bodies queue among themselves, not ahead of ordinary ones.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    small: Arc<Semaphore>,
    large: Arc<Semaphore>,
    split: (usize, usize),
}

/// Bodies up to this size reserve from the part of the budget large ones cannot use.
pub const SMALL_BODY: usize = 1024 * 1024;

/// The budget stayed exhausted for the whole wait.
#[derive(Debug, thiserror::Error)]
#[error("failed to reserve {wanted} bytes of the in-flight body budget within {}ms", waited.as_millis())]
pub struct BudgetExhausted {
    pub wanted: usize,
    pub waited: Duration,
}

/// Splits a budget into (small-body part, large-body part), at least one byte each.
pub fn split_budget(total: usize) -> (usize, usize) {
    let total = total.clamp(2, Semaphore::MAX_PERMITS);
    let small = (total / 4).max(1);
    (small, total - small)
}

impl BodyBudget {
    /// A budget of `total` bytes.
    pub fn new(total: usize) -> Self {
        let split = split_budget(total);
        Self {
            small: Arc::new(Semaphore::new(split.0)),
            large: Arc::new(Semaphore::new(split.1)),
            split,
        }
    }

    /// The budget.
    pub fn total(&self) -> usize {
        self.split.0 + self.split.1
    }

    /// Bytes reserved now.
    pub fn in_use(&self) -> usize {
        self.total() - self.small.available_permits() - self.large.available_permits()
    }

    /// Reserves `wanted` bytes (capped at its part), waiting at most `wait`; waiters are served
    /// in arrival order within each part.
    pub async fn reserve(
        &self,
        wanted: usize,
        wait: Duration,
    ) -> Result<OwnedSemaphorePermit, BudgetExhausted> {
        let (pool, part) = self.part_for(wanted);
        acquire(pool, wanted.min(part), wait).await
    }

    /// Reserves the memory of a review whose body is `body` bytes (see
    /// [`RESERVED_PER_BODY_BYTE`]; at most its part), waiting at most `wait`. The meter of its
    /// read gets what was reserved beyond the body for free; past it, grants come from the same
    /// part without waiting (HTTP 503 when others hold it, a denial past the whole part). All
    /// is given back when the meter is dropped.
    pub async fn reserve_review(
        &self,
        body: usize,
        wait: Duration,
    ) -> Result<Meter, BudgetExhausted> {
        let (pool, part) = self.part_for(body);
        let wanted = body.saturating_mul(RESERVED_PER_BODY_BYTE).min(part);
        let held = acquire(pool, wanted, wait).await?;
        let grants = ReadGrants {
            pool: pool.clone(),
            most: part.saturating_sub(wanted),
            part,
            granted: 0,
            held,
        };
        Ok(Meter::new(wanted.saturating_sub(body), grants))
    }

    fn part_for(&self, body: usize) -> (&Arc<Semaphore>, usize) {
        if body <= SMALL_BODY {
            (&self.small, self.split.0)
        } else {
            (&self.large, self.split.1)
        }
    }
}

/// What a review reserves for each byte of its body: the body and what its read may keep. Real
/// reviews charge 0.7 (5 KB) to 2.8 (1 MB, many containers and env lists) times their body.
pub const RESERVED_PER_BODY_BYTE: usize = 4;

/// Grants for a review's read, held with its reservation until the review is done.
struct ReadGrants {
    pool: Arc<Semaphore>,
    /// The part of the budget, less the reservation.
    most: usize,
    /// The most a review may keep, its body and its read together.
    part: usize,
    granted: usize,
    held: OwnedSemaphorePermit,
}

impl Allowance for ReadGrants {
    fn grant(&mut self, bytes: usize) -> Result<(), Refusal> {
        let too_large = Refusal::TooLarge { limit: self.part };
        if self.granted.saturating_add(bytes) > self.most {
            return Err(too_large);
        }
        let asked = u32::try_from(bytes).map_err(|_| too_large)?;
        let permit = self
            .pool
            .clone()
            .try_acquire_many_owned(asked)
            .map_err(|_| Refusal::Busy)?;
        self.held.merge(permit);
        self.granted += bytes;
        Ok(())
    }
}

async fn acquire(
    pool: &Arc<Semaphore>,
    wanted: usize,
    wait: Duration,
) -> Result<OwnedSemaphorePermit, BudgetExhausted> {
    // Budgets beyond 4 GiB: a single review can never need that much.
    if let Ok(asked) = u32::try_from(wanted)
        && let Ok(Ok(permit)) =
            tokio::time::timeout(wait, pool.clone().acquire_many_owned(asked)).await
    {
        return Ok(permit);
    }
    Err(BudgetExhausted {
        wanted,
        waited: wait,
    })
}

/// Bytes to reserve for a body: its declared length, never more than `body_limit` (a longer
/// body is refused or discarded, not kept); `body_limit` when the length is not declared.
pub fn reservation(declared: Option<u64>, body_limit: usize) -> usize {
    let declared = declared.and_then(|n| usize::try_from(n).ok());
    declared.map_or(body_limit, |n| n.min(body_limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;
    const SHORT: Duration = Duration::from_millis(10);

    #[test]
    fn reservation_is_the_declared_length_capped_at_the_limit() {
        assert_eq!(reservation(Some(5_000), 6_000_000), 5_000);
        assert_eq!(reservation(Some(0), 6_000_000), 0);
        assert_eq!(reservation(Some(50_000_000), 6_000_000), 6_000_000);
        assert_eq!(reservation(Some(u64::MAX), 6_000_000), 6_000_000);
        assert_eq!(reservation(None, 6_000_000), 6_000_000);
    }

    #[test]
    fn a_quarter_of_the_budget_is_kept_for_small_bodies() {
        assert_eq!(split_budget(60 * MIB), (15 * MIB, 45 * MIB));
        assert_eq!(split_budget(4), (1, 3));
        assert_eq!(split_budget(0), (1, 1));
    }

    #[tokio::test]
    async fn budget_is_given_back_when_the_permit_drops() {
        let budget = BodyBudget::new(16 * MIB);
        let a = budget.reserve(8 * MIB, SHORT).await.unwrap();
        assert_eq!(budget.in_use(), 8 * MIB);
        let err = budget.reserve(8 * MIB, SHORT).await.unwrap_err();
        assert_eq!(err.wanted, 8 * MIB);
        assert!(err.to_string().starts_with("failed to reserve"), "{err}");
        drop(a);
        assert_eq!(budget.in_use(), 0);
        let _b = budget.reserve(8 * MIB, SHORT).await.unwrap();
    }

    #[tokio::test]
    async fn large_bodies_cannot_take_the_small_bodies_part() {
        let budget = BodyBudget::new(16 * MIB);
        let all_large = budget.reserve(100 * MIB, SHORT).await.unwrap();
        assert_eq!(budget.in_use(), 12 * MIB);
        assert!(budget.reserve(2 * MIB, SHORT).await.is_err());
        let small = budget.reserve(5_000, SHORT).await.unwrap();
        assert_eq!(budget.in_use(), 12 * MIB + 5_000);
        drop((all_large, small));
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn a_waiter_gets_the_budget_once_it_frees_up() {
        let budget = BodyBudget::new(100);
        let held = budget.reserve(25, SHORT).await.unwrap();
        let waiter = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.reserve(20, Duration::from_secs(5)).await.is_ok() })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        assert!(waiter.await.unwrap());
    }

    #[tokio::test]
    async fn a_review_reserves_its_read_with_its_body_then_grants_come_from_the_same_part() {
        use crate::workload::meter::{Refusal, charge, metered};
        let budget = BodyBudget::new(16 * MIB);
        let mut meter = budget.reserve_review(2 * MIB, SHORT).await.unwrap();
        assert_eq!(budget.in_use(), 8 * MIB, "four bytes per body byte");
        metered(&mut meter, || {
            charge(6 * MIB).unwrap();
            assert_eq!(budget.in_use(), 8 * MIB, "the read's share was reserved");
            charge(MIB).unwrap();
            assert_eq!(budget.in_use(), 9 * MIB, "then granted from the large part");
        });
        // Others hold the rest of the large part: not now.
        let others = budget.reserve(3 * MIB, SHORT).await.unwrap();
        metered(&mut meter, || assert_eq!(charge(MIB), Err(Refusal::Busy)));
        drop(meter);
        assert_eq!(budget.in_use(), 3 * MIB, "all given back with the meter");
        drop(others);
        // More than the whole large part: never.
        let mut meter = budget.reserve_review(2 * MIB, SHORT).await.unwrap();
        metered(&mut meter, || {
            assert_eq!(charge(13 * MIB), Err(Refusal::TooLarge { limit: 12 * MIB }));
        });
        drop(meter);
        // A small body reserves from the small part; a huge one at most its whole part.
        let small = budget.reserve_review(5_000, SHORT).await.unwrap();
        assert_eq!(budget.in_use(), 20_000);
        let huge = budget.reserve_review(6 * MIB, SHORT).await.unwrap();
        assert_eq!(budget.in_use(), 20_000 + 12 * MIB);
        drop((small, huge));
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test]
    async fn connection_limit_counts_open_connections() {
        let limit = ConnectionLimit::new(2);
        let a = limit.acquire().await;
        let _b = limit.acquire().await;
        assert_eq!(limit.open(), 2);
        let third = tokio::time::timeout(SHORT, limit.acquire()).await;
        assert!(third.is_err(), "a third connection must wait");
        drop(a);
        assert_eq!(limit.open(), 1);
        let _c = tokio::time::timeout(SHORT, limit.acquire()).await.unwrap();
        assert_eq!(limit.max(), 2);
        assert_eq!(ConnectionLimit::new(0).max(), 1);
    }
}
