//! The first call of the quanta drop-in's `Instant::now()` (compat/quanta, on
//! timehands) in a fresh process, and the time before `main`; run by
//! `peer-bench`.

#[path = "../first_call_child.rs"]
mod child;

fn main() {
    let main_at = child::monotonic_ns();
    child::report(main_at, quanta_drop_in::Instant::now);
}
