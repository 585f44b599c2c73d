//! Ctrl-C (and SIGTERM, SIGHUP) as a request to stop: the measuring threads
//! finish the period they are in and the summary is printed, as cyclictest
//! does (`latency`, `load`), or a change made to the kernel is undone
//! (`track --kernel-rate`).

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;

static STOP: AtomicBool = AtomicBool::new(false);

/// Installs the handler and returns the flag it raises. Threads poll the flag
/// once a period; a signal that lands in a sleeping thread ends its sleep with
/// EINTR, which the thread takes as a cue to look at the flag.
pub fn stop_on_interrupt() -> anyhow::Result<&'static AtomicBool> {
    ctrlc::set_handler(|| STOP.store(true, Ordering::Relaxed))
        .context("cannot install the Ctrl-C handler")?;
    Ok(&STOP)
}
