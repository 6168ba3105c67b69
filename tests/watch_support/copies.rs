//! Copies of programs that tests run: [`copy_program`] makes one, [`run_copy`] starts it.
//!
//! An exec of a file that is open for writing anywhere fails with ETXTBSY ("text file busy").
//! Tests run on threads, and a thread that forks while this process holds a file open for
//! writing hands that descriptor to its child until the child execs. So a copy is made in a
//! child process, and a start that still meets ETXTBSY is tried again for a moment.
//!
//! It needs nothing but std, so that any test can include it by path, the library's unit tests
//! too.

use std::io;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How many times a start that fails with ETXTBSY is tried in all.
const TRIES: u32 = 100;
/// The pause before trying again.
const PAUSE: Duration = Duration::from_millis(10);

/// Copies the program `from` to `to` in a child process (`cp`), so that this process never
/// holds the copy open for writing.
pub fn copy_program(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .unwrap_or_else(|e| panic!("failed to run cp (coreutils): {e}"));
    assert!(
        status.success(),
        "cp {} {} failed: {status}",
        from.display(),
        to.display()
    );
}

/// Runs a copied program: `start` starts it (a [`Command`]'s `spawn`, `output` or `status`)
/// and is called again, [`TRIES`] times at most, while it fails with ETXTBSY. Any other
/// outcome, an error included, is returned as it is.
///
/// Only an exec by this process is seen here. A wrapper (`nsenter`, `chroot`) execs the copy
/// in a process of its own and reports ETXTBSY in its exit status; what keeps that from
/// happening is a copy made by [`copy_program`].
pub fn run_copy<T>(mut start: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut tries = 1;
    loop {
        match start() {
            Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy && tries < TRIES => {
                tries += 1;
                std::thread::sleep(PAUSE);
            }
            outcome => return outcome,
        }
    }
}
