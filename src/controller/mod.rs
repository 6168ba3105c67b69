//! The rollout controller inside `serve`: keeps the promise of the admission hash after
//! admission. Every replica keeps one watch-fed view of the config its opted-in namespaces
//! consume (reduced to per-key digests); the replica holding the Lease writes.

pub mod leader;
pub mod rate;
pub mod reconcile;
pub mod reduce;
pub mod store;
pub mod target;
pub mod view;
pub mod writer;
