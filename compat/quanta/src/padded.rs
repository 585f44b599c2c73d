//! A value alone on its cache line.
//!
//! Every `Instant::now` loads the count of `with_clock` closures, and every
//! recent read loads the pinned recent time. Left to the linker, they share a
//! line with each other and with whatever statics lie beside them (in a
//! program that also links quanta's peers, another library's recent time that
//! its thread stores every millisecond), and each store elsewhere on the line
//! makes the next read miss.

use core::ops::Deref;

/// `T` on a cache line of its own (64 bytes, x86's and most Arm cores').
#[repr(align(64))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> Deref for Padded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}
