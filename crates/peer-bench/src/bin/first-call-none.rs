//! The baseline of the first-call section: a process that links no clock
//! library and times an empty call; run by `peer-bench`.

#[path = "../first_call_child.rs"]
mod child;

fn main() {
    let main_at = child::monotonic_ns();
    child::report(main_at, || ());
}
