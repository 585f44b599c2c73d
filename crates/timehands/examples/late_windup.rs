//! A windup that comes late: the naive 64-bit product against the engine.
//!
//! The BSD kernels computed `th_scale * delta` in 64 bits (OpenBSD
//! before its 2021 patch). Once the product passes 2^64, that is once a windup is
//! about a second late, it wraps and whole seconds vanish. The engine takes the
//! full 128-bit product. Both run here on the same simulated 3 GHz counter: one
//! timeline wound up every millisecond, one wound up only after the delay; what
//! each loses is the late timeline's shortfall against the punctual one.
//!
//! `cargo run --release -p timehands --example late-windup`

use std::time::Duration;

use timehands::{BinTime, SimCounter, Timekeeper};

const HZ: u64 = 3_000_000_000;
const TICK: u64 = HZ / 1000;

/// The naive kernel: time at the last windup plus `scale * delta`, the product
/// kept in 64 bits.
struct NaiveClock {
    scale: u64,
    base: u64,
    offset: BinTime,
}

impl NaiveClock {
    fn now(&self, count: u64) -> BinTime {
        let frac = self.scale.wrapping_mul(count - self.base);
        self.offset + BinTime::new(0, frac)
    }

    fn windup(&mut self, count: u64) {
        self.offset = self.now(count);
        self.base = count;
    }
}

/// Uptime after `delay` on a fresh engine, wound up every `tick` counts (or
/// only at the end when `tick` is the whole delay).
fn engine(delay: u64, tick: u64) -> Result<BinTime, timehands::Error> {
    let counter = SimCounter::new(HZ);
    let tk = Timekeeper::builder(counter.clone())
        .windup_interval(Duration::from_millis(1))
        .build()?;
    let mut left = delay;
    while left > 0 {
        let step = left.min(tick);
        counter.advance(step);
        tk.windup();
        left -= step;
    }
    Ok(tk.uptime())
}

/// Uptime after `delay` on the naive kernel, wound up every `tick` counts.
fn naive(delay: u64, tick: u64) -> BinTime {
    let scale = ((1u128 << 64) / HZ as u128) as u64;
    let mut clock = NaiveClock {
        scale,
        base: 0,
        offset: BinTime::ZERO,
    };
    let mut count = 0;
    while count < delay {
        count += (delay - count).min(tick);
        clock.windup(count);
    }
    clock.now(count)
}

/// The punctual timeline in closed form: windups every tick lose nothing in
/// either scheme (each product is far below 2^64), so a count of whole ticks
/// needs no loop even for a year.
fn punctual(delay: u64, scale: u64) -> BinTime {
    let ticks = delay / TICK;
    let per_tick = BinTime::from_counts(TICK, scale);
    // per_tick * ticks, exactly: seconds and fraction multiplied apart.
    let frac = per_tick.frac() as u128 * ticks as u128;
    let whole_ticks = BinTime::new(
        per_tick.sec() * ticks as i64 + (frac >> 64) as i64,
        frac as u64,
    );
    whole_ticks + BinTime::from_counts(delay % TICK, scale)
}

/// What the late timeline lost, in seconds; "none" when it is the same `BinTime`
/// bit for bit (a loss under a nanosecond would print as 0.000000000).
fn loss(punctual: BinTime, late: BinTime) -> String {
    if punctual == late {
        "none".to_string()
    } else {
        (punctual - late).to_string()
    }
}

fn main() -> Result<(), timehands::Error> {
    let delays: [(&str, u64); 4] = [
        ("0.5 s", HZ / 2),
        ("2 s", 2 * HZ),
        ("1 h", 3600 * HZ),
        ("1 year", 365 * 24 * 3600 * HZ),
    ];
    let naive_scale = ((1u128 << 64) / HZ as u128) as u64;
    // The engine's scale is 2^64 / HZ rounded to nearest; read it off one count.
    let engine_scale = engine(1, 1)?.frac();

    println!("A 3 GHz counter; one windup after the delay, against windups every 1 ms.");
    println!();
    println!(
        "{:>7}  {:>22}  {:>22}  {:>22}  {:>16}",
        "delay", "punctual", "naive 64-bit, late", "naive loses", "timehands loses"
    );
    for (name, delay) in delays {
        let naive_punctual = punctual(delay, naive_scale);
        let naive_late = naive(delay, delay);
        let engine_punctual = punctual(delay, engine_scale);
        let engine_late = engine(delay, delay)?;
        // Where a simulation is cheap, check the closed form against real windups.
        if delay <= 2 * HZ {
            assert_eq!(naive(delay, TICK), naive_punctual);
            assert_eq!(engine(delay, TICK)?, engine_punctual);
        }
        println!(
            "{name:>7}  {:>22}  {:>22}  {:>22}  {:>16}",
            naive_punctual.to_string(),
            naive_late.to_string(),
            loss(naive_punctual, naive_late),
            loss(engine_punctual, engine_late),
        );
    }
    Ok(())
}
