//! The named points of the clock's life where the crate's own tests fork
//! (`process_tests.rs` pauses the clock's thread at one and forks there):
//! nothing outside those tests.

/// A point in the clock's life, `name`d for the tests that fork there.
#[inline(always)]
pub(super) fn point(_name: &'static str) {
    #[cfg(all(test, unix))]
    super::process_tests::pause_at(_name);
}
