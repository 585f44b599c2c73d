//! Soft-timer throughput side by side, in one run: the timehands wheel,
//! tokio's timer wheel, a `std::collections::BinaryHeap`, and the timehands
//! deadline heap.
//!
//! - arm+cancel: arm a timer and cancel it at once, the life of most
//!   timeouts (a reply came in time). For tokio: `sleep_until` polled once
//!   (so that it is really registered in the driver's wheel) and dropped,
//!   under a current-thread runtime. For `BinaryHeap`, which cannot remove
//!   by key, cancel is the usual lazy flag, skipped when popped: its figure
//!   is a push and a flag, the pop that skips the entry being paid later,
//!   outside the measurement, so it flatters the heap.
//!   Measured in an empty structure and with 100k other timers armed.
//! - burst expiry: 1M timers sharing one deadline, all expired; timed from
//!   the deadline's processing to the last expiry.
//!
//! Each figure is the best of several rounds, the implementations taking
//! turns within a round so that noise from other processes hits them alike.
//! Run with `cargo bench -p timehands-timer --bench wheel_vs_tokio`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::task::{Context, Waker};
use std::time::Duration;

use timehands_timer::heap::DeadlineHeap;
use timehands_timer::wheel::Wheel;

const TIMERS: usize = 1_000_000;
const ARM_ROUNDS: usize = 5;
const BURST_ROUNDS: usize = 3;
/// Timers left armed during the second arm+cancel measurement, as a busy
/// server has.
const STANDING: usize = 100_000;
/// Where simulated time starts for the clock-free structures.
const BASE_NS: u64 = 1 << 40;

/// Timeouts from 1 ms to about 1 s, as network retries and leases have,
/// from a fixed LCG so every implementation gets the same ones.
fn offsets() -> Vec<u64> {
    let mut state = 1u64;
    (0..TIMERS)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            1_000_000 + (state >> 34) % 1_000_000_000
        })
        .collect()
}

/// Runs `f` (which handles `TIMERS` timers) and returns timers per second.
fn rate(f: impl FnOnce()) -> f64 {
    let start = std::time::Instant::now();
    f();
    TIMERS as f64 / start.elapsed().as_secs_f64()
}

fn wheel_arm_cancel(offsets: &[u64], standing: usize) -> f64 {
    let mut wheel = Wheel::new(20);
    wheel.poll(BASE_NS);
    for (id, &off) in offsets[..standing].iter().enumerate() {
        wheel.insert(BASE_NS + off, 0, id);
    }
    rate(|| {
        for (id, &off) in offsets.iter().enumerate() {
            let key = wheel.insert(BASE_NS + off, 0, id);
            black_box(wheel.remove(key));
        }
    })
}

fn deadline_heap_arm_cancel(offsets: &[u64], standing: usize) -> f64 {
    let mut heap = DeadlineHeap::new();
    for (id, &off) in offsets[..standing].iter().enumerate() {
        heap.push(BASE_NS + off, id);
    }
    rate(|| {
        for (id, &off) in offsets.iter().enumerate() {
            let key = heap.push(BASE_NS + off, id);
            black_box(heap.remove(key));
        }
    })
}

fn binary_heap_arm_cancel(offsets: &[u64], standing: usize) -> f64 {
    let mut heap: BinaryHeap<_> = offsets[..standing]
        .iter()
        .enumerate()
        .map(|(id, &off)| Reverse((BASE_NS + off, id)))
        .collect();
    let mut cancelled = vec![false; TIMERS];
    rate(|| {
        for (id, &off) in offsets.iter().enumerate() {
            heap.push(Reverse((BASE_NS + off, id)));
            cancelled[id] = true;
        }
        black_box((&heap, &cancelled));
    })
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

/// Polls `sleep` once with a waker that does nothing, which registers it in
/// the driver's wheel.
fn register(sleep: Pin<&mut tokio::time::Sleep>) {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(sleep.poll(&mut cx).is_pending(), "a future deadline");
}

fn tokio_arm_cancel(offsets: &[u64], standing: usize) -> f64 {
    let rt = tokio_runtime();
    // `unconstrained`: tokio's cooperative budget would otherwise make every
    // poll after the 128th return Pending without registering.
    rt.block_on(tokio::task::unconstrained(async {
        let base = tokio::time::Instant::now();
        let mut armed: Vec<Pin<Box<tokio::time::Sleep>>> = offsets[..standing]
            .iter()
            .map(|&off| Box::pin(tokio::time::sleep_until(base + Duration::from_nanos(off))))
            .collect();
        for sleep in &mut armed {
            register(sleep.as_mut());
        }
        rate(|| {
            for &off in offsets {
                let sleep = pin!(tokio::time::sleep_until(base + Duration::from_nanos(off)));
                register(sleep);
            }
        })
    }))
}

fn wheel_burst() -> f64 {
    let mut wheel = Wheel::new(20);
    wheel.poll(BASE_NS);
    // On a tick, so that `deadline` is when the wheel fires them.
    let deadline = BASE_NS + (5 << 30);
    for id in 0..TIMERS {
        wheel.insert(deadline, 0, id);
    }
    rate(|| {
        let mut fired = 0;
        while let Some(id) = wheel.poll(deadline) {
            black_box(id);
            fired += 1;
        }
        assert_eq!(fired, TIMERS);
    })
}

fn deadline_heap_burst() -> f64 {
    let mut heap = DeadlineHeap::new();
    let deadline = BASE_NS + 5_000_000_000;
    for id in 0..TIMERS {
        heap.push(deadline, id);
    }
    rate(|| while black_box(heap.pop_expired(deadline)).is_some() {})
}

fn binary_heap_burst() -> f64 {
    let deadline = BASE_NS + 5_000_000_000;
    let mut heap: BinaryHeap<_> = (0..TIMERS).map(|id| Reverse((deadline, id))).collect();
    rate(|| {
        while let Some(Reverse((d, id))) = heap.peek().copied() {
            if d > deadline {
                break;
            }
            heap.pop();
            black_box(id);
        }
    })
}

fn tokio_burst() -> f64 {
    let rt = tokio_runtime();
    rt.block_on(tokio::task::unconstrained(async {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
        let mut sleeps: Vec<Pin<Box<tokio::time::Sleep>>> = (0..TIMERS)
            .map(|_| Box::pin(tokio::time::sleep_until(deadline)))
            .collect();
        for sleep in &mut sleeps {
            register(sleep.as_mut());
        }
        // Past the deadline (and tokio's millisecond rounding) before the
        // clock starts: the runtime's driver then expires all of them at
        // its next turn, which the first await below gives it.
        std::thread::sleep(deadline + Duration::from_millis(5) - tokio::time::Instant::now());
        let start = std::time::Instant::now();
        for sleep in &mut sleeps {
            sleep.as_mut().await;
        }
        TIMERS as f64 / start.elapsed().as_secs_f64()
    }))
}

struct Row {
    name: &'static str,
    arm_cancel: f64,
    arm_cancel_loaded: f64,
    burst: f64,
}

fn main() {
    let offsets = offsets();
    let mut rows = [
        "timehands wheel",
        "tokio",
        "BinaryHeap (lazy cancel)",
        "timehands heap",
    ]
    .map(|name| Row {
        name,
        arm_cancel: 0.0,
        arm_cancel_loaded: 0.0,
        burst: 0.0,
    });
    let arm: [fn(&[u64], usize) -> f64; 4] = [
        wheel_arm_cancel,
        tokio_arm_cancel,
        binary_heap_arm_cancel,
        deadline_heap_arm_cancel,
    ];
    let burst: [fn() -> f64; 4] = [
        wheel_burst,
        tokio_burst,
        binary_heap_burst,
        deadline_heap_burst,
    ];
    for _ in 0..ARM_ROUNDS {
        for (row, f) in rows.iter_mut().zip(arm) {
            row.arm_cancel = row.arm_cancel.max(f(&offsets, 0));
            row.arm_cancel_loaded = row.arm_cancel_loaded.max(f(&offsets, STANDING));
        }
    }
    for _ in 0..BURST_ROUNDS {
        for (row, f) in rows.iter_mut().zip(burst) {
            row.burst = row.burst.max(f());
        }
    }
    println!(
        "{TIMERS} timers; best of {ARM_ROUNDS} rounds (arm+cancel), {BURST_ROUNDS} rounds (burst)"
    );
    println!(
        "{:<26} {:>16} {:>18} {:>18}",
        "", "arm+cancel M/s", "100k armed M/s", "burst expiry M/s"
    );
    for row in &rows {
        println!(
            "{:<26} {:>16.2} {:>18.2} {:>18.2}",
            row.name,
            row.arm_cancel / 1e6,
            row.arm_cancel_loaded / 1e6,
            row.burst / 1e6
        );
    }
    let wheel = &rows[0];
    for row in &rows[1..] {
        println!(
            "timehands wheel / {}: arm+cancel {:.2}x, with 100k armed {:.2}x, burst expiry {:.2}x",
            row.name,
            wheel.arm_cancel / row.arm_cancel,
            wheel.arm_cancel_loaded / row.arm_cancel_loaded,
            wheel.burst / row.burst
        );
    }
    let arm_ratio = wheel.arm_cancel / rows[1].arm_cancel;
    println!(
        "target: arm+cancel at least 2x tokio's: {arm_ratio:.2}x, {}",
        if arm_ratio >= 2.0 { "met" } else { "missed" }
    );
}
