//! Helpers of the soak test (`tests/admission/local/soak.rs`): readings of the server process, and the
//! flatness verdict over them.
#![allow(dead_code)]

pub mod reading;
pub mod verdict;
