//! The firmware's output: one numbered line per check on the host's stdout
//! (semihosting), a tally, and the exit status QEMU passes on.

use core::fmt;

use cortex_m_semihosting::{debug, hprintln};

/// The checks made so far.
#[derive(Default)]
pub struct Report {
    passed: u32,
    failed: u32,
}

impl Report {
    /// Prints `ok N - what` or `FAIL N - what`, and counts it.
    pub fn check(&mut self, passed: bool, what: fmt::Arguments) {
        let number = self.passed + self.failed + 1;
        if passed {
            self.passed += 1;
            hprintln!("ok {} - {}", number, what);
        } else {
            self.failed += 1;
            hprintln!("FAIL {} - {}", number, what);
        }
    }

    /// Prints the tally and exits QEMU: status 0 when every check passed.
    pub fn finish(self) -> ! {
        hprintln!("checks: {} passed, {} failed", self.passed, self.failed);
        exit(self.failed == 0)
    }
}

/// Prints what went wrong, for a failure the checks cannot go on from, and
/// exits with status 1.
pub fn fatal(what: fmt::Arguments) -> ! {
    hprintln!("FAIL - {}", what);
    exit(false)
}

/// Ends the emulation with status 0 (`passed`) or 1.
pub fn exit(passed: bool) -> ! {
    debug::exit(if passed {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    // Only without a semihosting host does the exit call return.
    loop {
        cortex_m::asm::wfi();
    }
}
