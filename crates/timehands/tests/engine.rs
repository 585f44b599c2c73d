//! Deterministic scenarios on a `SimCounter`: every invariant of the engine that
//! one thread can check, for each ring size.

use std::time::Duration;

use timehands::{BinTime, Counter, Error, SimCounter, Timekeeper, Windup};

mod common;

use common::{RINGS, following, timekeeper};

const GHZ3: u64 = 3_000_000_000;

/// 2^64 / frequency rounded to nearest: the scale the engine starts with.
fn nominal(frequency: u64) -> u64 {
    (((1u128 << 64) + frequency as u128 / 2) / frequency as u128) as u64
}

/// `n`, or a two-hundredth of it under miri, which is a thousand times
/// slower (and slower still at a windup, which builds the nanosecond
/// segments in 128-bit arithmetic).
fn steps(n: usize) -> usize {
    if cfg!(miri) { n / 200 } else { n }
}

/// A small deterministic generator, so that failures replay.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn bad_counters_and_settings_are_refused_with_a_clear_error() {
    let cases: [(Result<Timekeeper<SimCounter>, Error>, &str); 9] = [
        (Timekeeper::new(SimCounter::new(0)), "frequency 0 Hz"),
        (Timekeeper::new(SimCounter::new(1)), "frequency 1 Hz"),
        (Timekeeper::new(SimCounter::with_mask(1000, 0)), "mask 0x0"),
        (
            Timekeeper::new(SimCounter::with_mask(1000, 0x1234)),
            "mask 0x1234",
        ),
        (
            Timekeeper::builder(SimCounter::new(1000)).hands(0).build(),
            "0 timehands",
        ),
        (
            Timekeeper::builder(SimCounter::new(1000)).hands(17).build(),
            "17 timehands",
        ),
        (
            Timekeeper::builder(SimCounter::new(1000))
                .windup_interval(Duration::from_millis(1))
                .build(),
            "is 1 counts",
        ),
        (
            Timekeeper::builder(SimCounter::with_mask(1_000_000, 0xffff))
                .windup_interval(Duration::from_millis(10))
                .build(),
            "is 10000 counts",
        ),
        (
            Timekeeper::builder(SimCounter::new(u64::MAX))
                .windup_interval(Duration::MAX)
                .build(),
            "an eighth of the counter's range",
        ),
    ];
    for (result, words) in cases {
        let err = result.expect_err(words);
        let text = err.to_string();
        assert!(text.contains(words), "{text:?} should name {words:?}");
        assert!(!text.contains('\n'), "one line: {text:?}");
    }
    let tk = Timekeeper::builder(SimCounter::new(1000))
        .windup_interval(Duration::from_millis(10))
        .build()
        .unwrap();
    assert_eq!(
        tk.set_frequency_adjustment(500_001),
        Err(Error::FrequencyAdjustment { ppb: 500_001 })
    );
    assert_eq!(
        tk.set_frequency_adjustment(-500_001),
        Err(Error::FrequencyAdjustment { ppb: -500_001 })
    );
    assert_eq!(tk.set_frequency_adjustment(-500_000), Ok(()));
    // In ppt, the whole ppb beyond the range, rounded away from zero.
    assert_eq!(
        tk.set_frequency_adjustment_ppt(500_000_001),
        Err(Error::FrequencyAdjustment { ppb: 500_001 })
    );
    assert_eq!(
        tk.set_frequency_adjustment_ppt(-500_000_001),
        Err(Error::FrequencyAdjustment { ppb: -500_001 })
    );
    assert_eq!(tk.set_frequency_adjustment_ppt(500_000_000), Ok(()));
}

#[test]
fn uptime_starts_at_zero_and_counts_exactly() {
    for hands in RINGS {
        let counter = SimCounter::new(1_000_000_000);
        counter.set(123_456_789);
        let tk = timekeeper(&counter, hands);
        assert_eq!(tk.uptime(), BinTime::ZERO);
        assert_eq!(tk.realtime(), BinTime::ZERO);
        counter.advance(1_500_000_000);
        assert_eq!(tk.uptime().as_nanos(), 1_500_000_000);
        tk.windup();
        counter.advance(250);
        assert_eq!(tk.uptime().as_nanos(), 1_500_000_250);
    }
}

/// Invariant 2: a windup delayed by T gives the same time, bit for bit, as
/// windups on time.
#[test]
#[cfg_attr(
    miri,
    ignore = "2 million windups of integer arithmetic: too slow for miri"
)]
fn a_windup_one_hour_late_loses_nothing() {
    for hands in RINGS {
        let late = SimCounter::new(GHZ3);
        let punctual = SimCounter::new(GHZ3);
        let tk_late = timekeeper(&late, hands);
        let tk_punctual = timekeeper(&punctual, hands);
        let tick = GHZ3 / 200; // windups every 5 ms
        for _ in 0..3600 * 200 {
            punctual.advance(tick);
            tk_punctual.windup();
        }
        late.advance(3600 * GHZ3);
        assert_eq!(tk_late.uptime(), tk_punctual.uptime());
        tk_late.windup();
        assert_eq!(tk_late.uptime(), tk_punctual.uptime());
        late.advance(12_345);
        punctual.advance(12_345);
        assert_eq!(tk_late.uptime(), tk_punctual.uptime());
        // And both are the exact product of the elapsed counts and the scale.
        assert_eq!(
            tk_late.uptime(),
            BinTime::from_counts(3600 * GHZ3 + 12_345, nominal(GHZ3))
        );
    }
}

#[test]
fn a_windup_one_year_late_loses_nothing() {
    let year = 365 * 24 * 3600 * GHZ3;
    for hands in RINGS {
        let counter = SimCounter::new(GHZ3);
        let tk = timekeeper(&counter, hands);
        counter.advance(year);
        let before = tk.uptime();
        tk.windup();
        assert_eq!(tk.uptime(), before);
        // Windups every 5 ms from here on continue the same line, and the line
        // is the exact product, which is what punctual windups give (the hour
        // test shows).
        for _ in 0..1000 {
            counter.advance(GHZ3 / 200);
            tk.windup();
        }
        let elapsed = year + 1000 * (GHZ3 / 200);
        assert_eq!(tk.uptime(), BinTime::from_counts(elapsed, nominal(GHZ3)));
    }
}

/// A 32-bit counter stalled for most of its wrap period is exact: any delta
/// below seven eighths of the range.
#[test]
fn a_32_bit_counter_stalled_for_seven_eighths_of_its_wrap_is_exact() {
    let mask = u32::MAX as u64;
    let longest = mask - (mask >> 3);
    for hands in RINGS {
        let counter = SimCounter::with_mask(GHZ3, mask);
        counter.set(mask - 1000); // so that the stall wraps the counter
        let tk = timekeeper(&counter, hands);
        let mut expected = 0u64;
        for stall in [longest, 1, longest - 7, GHZ3 / 1000] {
            counter.advance(stall);
            expected += stall;
            assert_eq!(tk.uptime(), BinTime::from_counts(expected, nominal(GHZ3)));
            tk.windup();
            assert_eq!(tk.uptime(), BinTime::from_counts(expected, nominal(GHZ3)));
        }
    }
}

/// A counter read behind the base (another CPU a few cycles behind, a reset) is
/// clamped to the base, never wrapped into a huge delta; so is a delta in the top
/// eighth of a narrow counter's range.
#[test]
fn reads_behind_the_base_are_clamped_to_the_base() {
    for (mask, hands) in [(u64::MAX, 1), (u64::MAX, 8), (u32::MAX as u64, 2)] {
        let counter = SimCounter::with_mask(1_000_000_000, mask);
        let tk = timekeeper(&counter, hands);
        counter.advance(5_000_000);
        tk.windup();
        let at_windup = tk.uptime();
        assert_eq!(at_windup.as_nanos(), 5_000_000);
        let base = counter.value();
        counter.set(base - 40); // 40 counts behind the base
        assert_eq!(tk.uptime(), at_windup);
        assert_eq!(tk.uptime_and_due(), (at_windup, false), "skew is not due");
        tk.windup();
        assert_eq!(tk.uptime(), at_windup);
        // The windup behind the base kept the base: back at it, no time has
        // been gained from the skew.
        counter.set(base);
        assert_eq!(tk.uptime(), at_windup);
        counter.set(base - 40);
        counter.set(counter.value() + 40 + (mask - (mask >> 3)) + 1); // a top-eighth delta
        assert_eq!(tk.uptime(), at_windup);
    }
}

/// No read of a retired timekeeper is later than the time it was retired at,
/// whenever it was retired in its windup interval: the retire point is never
/// before the promise, which readers pass without looking at the state.
#[test]
fn no_read_after_retire_exceeds_the_retire_point() {
    for hands in RINGS {
        for wait in [0u64, 1, 10, 100, 1_000, 10_000, 999_999] {
            let counter = SimCounter::new(1_000_000_000);
            let tk = timekeeper(&counter, hands);
            counter.advance(1_000_000);
            tk.windup();
            counter.advance(wait);
            let retired_at = tk.retire();
            for _ in 0..3_000 {
                counter.advance(1_000);
                assert!(tk.uptime() <= retired_at, "wait {wait}");
            }
            assert_eq!(tk.uptime(), retired_at);
        }
    }
}

/// A counter that went back by more than an interval (a reset) clamps every
/// read to the base, and tells its readers a windup is due all the same, so
/// that clocks wound up by their readers (and a watchdog that runs with the
/// windups) go on; a few counts of skew do not.
#[test]
fn a_counter_reset_keeps_windups_due() {
    for hands in RINGS {
        let counter = SimCounter::new(1_000_000_000);
        let tk = timekeeper(&counter, hands);
        counter.advance(5_000_000);
        tk.windup();
        let at_windup = tk.uptime();
        counter.set(counter.value() - 1_000_000); // exactly an interval back
        assert_eq!(tk.uptime_and_due(), (at_windup, false));
        counter.set(counter.value() - 1); // more than an interval back
        assert_eq!(tk.uptime_and_due(), (at_windup, true));
        assert_eq!(tk.uptime_unordered_and_due(), (at_windup, true));
    }
}

/// Drives a timekeeper through random advances, windups, frequency changes and
/// slews, checking after each step that uptime did not decrease and that only
/// an advance of the counter moved it.
fn random_walk(hands: usize, seed: u64, steps: usize) -> Timekeeper<SimCounter> {
    let counter = SimCounter::new(GHZ3);
    let tk = timekeeper(&counter, hands);
    let mut rng = Lcg(seed);
    for _ in 0..steps {
        let before = tk.uptime();
        let advanced = match rng.below(6) {
            0 => {
                counter.advance(rng.below(GHZ3 / 100));
                true
            }
            1 => {
                counter.advance(rng.below(GHZ3 / 1000));
                true
            }
            2 => {
                let ppb = rng.below(1_000_001) as i64 - 500_000;
                tk.set_frequency_adjustment(ppb).unwrap();
                false
            }
            3 => {
                tk.adjtime(rng.below(2_000_001) as i64 - 1_000_000);
                false
            }
            _ => {
                assert_eq!(tk.windup(), Windup::Published);
                false
            }
        };
        let after = tk.uptime();
        assert!(after >= before, "went backwards: {before} then {after}");
        if !advanced {
            // Invariant 4: windups and adjustments never step time.
            assert_eq!(before, after, "a windup or adjustment stepped time");
        }
    }
    tk
}

/// Invariants 3 and 4 on one thread: uptime never decreases and no windup,
/// frequency change or slew steps it.
#[test]
fn windups_and_rate_changes_never_step_or_reverse_time() {
    for hands in RINGS {
        for seed in 1..=4 {
            let n = steps(20_000);
            let tk = random_walk(hands, seed, n);
            let stats = tk.stats();
            assert!(stats.windups as usize > n / 10, "{stats:?}");
            assert!(stats.rate_changes as usize > n / 200, "{stats:?}");
        }
    }
}

/// Invariant 4, pointwise: at one counter value, the time before and after a
/// windup (with a rate change scheduled) is identical, and the time at the
/// switch point joins both rates.
#[test]
fn a_rate_change_is_continuous_at_the_sample_and_at_the_switch_point() {
    for hands in RINGS {
        let counter = SimCounter::new(GHZ3);
        let tk = timekeeper(&counter, hands);
        counter.advance(GHZ3 / 100);
        tk.set_frequency_adjustment(-500_000).unwrap();
        let before = tk.uptime();
        tk.windup();
        assert_eq!(tk.uptime(), before);
        // The new rate starts at the switch point, a quarter interval ahead.
        let lead = GHZ3 / 1000 / 4;
        counter.advance(lead - 1);
        let just_before = tk.uptime();
        assert_eq!(
            just_before,
            before + BinTime::from_counts(lead - 1, nominal(GHZ3))
        );
        counter.advance(1);
        let at_switch = tk.uptime();
        assert_eq!(
            at_switch,
            before + BinTime::from_counts(lead, nominal(GHZ3))
        );
        counter.advance(1_000);
        let slow = nominal(GHZ3) - (nominal(GHZ3) as u128 * 500_000 / 1_000_000_000) as u64;
        assert_eq!(tk.uptime(), at_switch + BinTime::from_counts(1_000, slow));
        assert_eq!(tk.stats().rate_changes, 1);
    }
}

/// `set_realtime` steps realtime only; uptime does not move.
#[test]
fn set_realtime_steps_only_realtime() {
    for hands in RINGS {
        let counter = SimCounter::new(1_000_000_000);
        let tk = timekeeper(&counter, hands);
        counter.advance(2_000_000_000);
        tk.windup();
        let uptime = tk.uptime();
        tk.set_realtime(BinTime::new(1_700_000_000, 0));
        assert_eq!(tk.uptime(), uptime);
        assert_eq!(tk.realtime(), BinTime::new(1_700_000_000, 0));
        // The coarse clocks hold the windup's time to 2^-32 s.
        let truncation = BinTime::new(0, 1 << 32);
        assert!(uptime - tk.uptime_coarse() < truncation);
        assert!(BinTime::new(1_700_000_000, 0) - tk.realtime_coarse() < truncation);
        counter.advance(500_000_000);
        assert_eq!(tk.realtime().as_nanos(), 1_700_000_000_500_000_000);
        // Backwards too: realtime may step back, uptime never.
        tk.set_realtime(BinTime::new(1_000, 0));
        assert_eq!(tk.realtime(), BinTime::new(1_000, 0));
        assert_eq!(tk.uptime().as_nanos(), 2_500_000_000);
    }
}

/// Invariant 5: the coarse clocks are never ahead of a precise read that
/// follows, never decrease, and lag by at most the time since the last windup.
#[test]
fn coarse_clocks_lag_by_at_most_the_time_since_the_last_windup() {
    for hands in RINGS {
        let counter = SimCounter::new(GHZ3);
        let tk = timekeeper(&counter, hands);
        let mut rng = Lcg(7);
        let mut last_coarse = tk.uptime_coarse();
        let mut at_windup = tk.uptime();
        for _ in 0..steps(10_000) {
            match rng.below(3) {
                0 => {
                    tk.windup();
                    at_windup = tk.uptime();
                }
                1 => tk
                    .set_frequency_adjustment(rng.below(1_000_001) as i64 - 500_000)
                    .unwrap(),
                _ => counter.advance(rng.below(GHZ3 / 500)),
            }
            let coarse = tk.uptime_coarse();
            let precise = tk.uptime();
            assert!(coarse >= last_coarse, "coarse went backwards");
            assert!(
                coarse <= precise,
                "coarse {coarse} ahead of precise {precise}"
            );
            // Truncated to 2^-32 s, never more than that below the windup's time.
            assert!(at_windup - coarse < BinTime::new(0, 1 << 32));
            assert!(coarse <= at_windup);
            assert!(tk.realtime_coarse() <= tk.realtime());
            last_coarse = coarse;
        }
    }
}

/// Concurrent windups are safe: while one writer is inside a windup, another
/// call returns `Busy` at once. (The writer here is held inside its counter read.)
#[test]
fn a_second_writer_returns_busy() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};

    struct Holding {
        inner: SimCounter,
        hold: AtomicBool,
        inside: Barrier,
        release: Barrier,
    }
    impl Counter for Holding {
        fn read(&self) -> u64 {
            if self.hold.swap(false, Ordering::SeqCst) {
                self.inside.wait();
                self.release.wait();
            }
            self.inner.read()
        }
        fn frequency(&self) -> u64 {
            self.inner.frequency()
        }
    }
    let tk = Arc::new(
        Timekeeper::new(Holding {
            inner: SimCounter::new(1_000_000),
            hold: AtomicBool::new(false),
            inside: Barrier::new(2),
            release: Barrier::new(2),
        })
        .unwrap(),
    );
    let counter = tk.counter();
    counter.hold.store(true, Ordering::SeqCst);
    let writer = {
        let tk = tk.clone();
        std::thread::spawn(move || tk.windup())
    };
    counter.inside.wait();
    assert_eq!(tk.windup(), Windup::Busy);
    // A refused writer must leave the lock with its holder.
    assert_eq!(tk.windup(), Windup::Busy);
    counter.release.wait();
    assert_eq!(writer.join().unwrap(), Windup::Published);
    assert_eq!(tk.windup(), Windup::Published);
}

/// A timekeeper can start from a given uptime (one that takes over from
/// another continues its time), and readers learn when a windup is due.
#[test]
fn start_at_and_windup_due() {
    for hands in RINGS {
        let counter = SimCounter::new(1_000_000_000);
        let start = BinTime::new(42, 1 << 63);
        let tk = Timekeeper::builder(counter.clone())
            .hands(hands)
            .windup_interval(Duration::from_millis(1))
            .start_at(start)
            .build()
            .unwrap();
        assert_eq!(tk.uptime(), start);
        assert_eq!(tk.uptime_coarse(), start);
        assert_eq!(tk.uptime_and_due(), (start, false));
        counter.advance(999_999);
        assert!(!tk.uptime_and_due().1, "due before an interval has passed");
        counter.advance(1);
        let (uptime, due) = tk.uptime_and_due();
        assert!(due, "a whole interval since the last windup");
        assert_eq!(uptime, tk.uptime());
        assert_eq!(tk.uptime_unordered_and_due(), (uptime, true));
        tk.windup();
        assert!(!tk.uptime_and_due().1, "a windup resets it");
        assert!(!tk.uptime_unordered_and_due().1);
    }
}

/// A timekeeper can start at a counter value paired with the time given
/// (read before it was built): the counts since then are already time.
#[test]
fn start_at_a_paired_count() {
    for hands in RINGS {
        let counter = SimCounter::new(1_000_000_000);
        counter.advance(5_000);
        let paired = counter.read();
        counter.advance(1_500); // building took 1.5 µs
        let start = BinTime::new(7, 0);
        let tk = Timekeeper::builder(counter.clone())
            .hands(hands)
            .start_at(start)
            .start_count(paired)
            .build()
            .unwrap();
        let scale = (((1u128 << 64) + 500_000_000) / 1_000_000_000) as u64;
        assert_eq!(tk.uptime(), start + BinTime::from_counts(1_500, scale));
        tk.windup();
        counter.advance(500);
        assert_eq!(tk.uptime(), start + BinTime::from_counts(2_000, scale));
    }
}

/// A read past its hands' promise asks the counter to order the accesses after
/// its read (a hardware counter's `lfence`); a read within the promise, the
/// common case, does not pay for it.
#[test]
fn only_the_slow_path_orders_after_the_read() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting {
        time: SimCounter,
        ordered: AtomicUsize,
    }
    impl Counter for Counting {
        fn read(&self) -> u64 {
            self.time.read()
        }
        fn frequency(&self) -> u64 {
            self.time.frequency()
        }
        fn order_after_read(&self) {
            self.ordered.fetch_add(1, Ordering::SeqCst);
        }
    }
    let tk = Timekeeper::builder(Counting {
        time: SimCounter::new(1_000_000_000),
        ordered: AtomicUsize::new(0),
    })
    .windup_interval(Duration::from_millis(1))
    .build()
    .unwrap();
    let counter = tk.counter();
    counter.time.advance(999_999); // within the first hands' promise
    tk.uptime();
    assert_eq!(counter.ordered.load(Ordering::SeqCst), 0);
    counter.time.advance(1); // at the promise: the slow path
    tk.uptime();
    assert_eq!(counter.ordered.load(Ordering::SeqCst), 1);
}

/// A refined counter frequency is a rate change like any other: continuous,
/// from the next switch point on; a boottime offset sets realtime exactly.
#[test]
fn counter_frequency_and_boottime_can_be_set() {
    for hands in RINGS {
        let counter = SimCounter::new(1_000_000_000);
        let tk = timekeeper(&counter, hands);
        counter.advance(5_000_000);
        tk.windup();
        assert_eq!(tk.set_counter_frequency(1), Err(Error::Frequency { hz: 1 }));
        tk.set_counter_frequency(2_000_000_000).unwrap(); // it was twice as fast
        counter.advance(250_000); // the last windup's switch point
        let before = tk.uptime();
        tk.windup();
        assert_eq!(tk.uptime(), before);
        // The new rate starts at the old hands' promise, one interval on.
        counter.advance(1_000_000);
        let at_switch = tk.uptime();
        counter.advance(2_000_000);
        assert_eq!((tk.uptime() - at_switch).as_nanos(), 1_000_000);

        let offset = BinTime::new(1_700_000_000, 12345);
        tk.set_boottime(offset);
        assert_eq!(tk.realtime(), tk.uptime() + offset);
    }
}

/// A timekeeper that follows a reference (CLOCK_MONOTONIC, for the host)
/// whose counter runs on through a suspend the reference does not count:
/// readers on threads through the resume never step back and never read
/// more than two windup intervals ahead of the reference read after them,
/// and the first windup after the resume takes the hour out. A paused VM,
/// where the reference jumps with the counter, keeps the time that passed.
#[test]
#[cfg_attr(miri, ignore = "readers spinning on threads: too slow under miri")]
fn a_suspend_the_reference_did_not_see_is_taken_out() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    const HOUR: u64 = 3_600_000_000_000;
    for hands in RINGS {
        let (counter, tk) = following(hands);
        let tk = Arc::new(tk);
        // The reference, in ns: the counter less the time suspended.
        let reference = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let running = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (tk, reference, stop) = (tk.clone(), reference.clone(), stop.clone());
                let running = running.clone();
                std::thread::spawn(move || {
                    let mut last = 0;
                    let mut reads = 0u64;
                    running.fetch_add(1, Ordering::AcqRel);
                    while !stop.load(Ordering::Acquire) {
                        let now = tk.uptime_nanos();
                        let after = reference.load(Ordering::Acquire);
                        assert!(now >= last, "{last} then {now}");
                        assert!(
                            now <= after + 2_000_000,
                            "{now} ns read, reference {after} ns"
                        );
                        last = now;
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        while running.load(Ordering::Acquire) < 2 {
            std::thread::yield_now();
        }
        let run = |ms: u64| {
            for _ in 0..ms * 10 {
                std::thread::yield_now();
                // The counter first: a reader never sees the reference ahead.
                counter.advance(100_000);
                reference.fetch_add(100_000, Ordering::Release);
                if tk.uptime_and_due().1 {
                    tk.windup_following(|| {
                        BinTime::from_nanos(reference.load(Ordering::Acquire) as i128)
                    });
                }
            }
        };
        run(20);
        let before = tk.uptime_nanos();
        counter.advance(HOUR); // suspended: the reference stands still
        run(20);
        let after = tk.uptime_nanos();
        let mono = reference.load(Ordering::Acquire);
        assert!(after <= mono + 2_000_000, "{after} ns, reference {mono} ns");
        assert!(after - before < 25_000_000, "{before} then {after}");
        // A paused VM: the counter and the reference both ran an hour on.
        counter.advance(HOUR);
        reference.fetch_add(HOUR, Ordering::Release);
        run(5);
        let resumed = tk.uptime_nanos();
        assert!(resumed >= after + HOUR, "{after} then {resumed}");
        stop.store(true, Ordering::Release);
        for reader in readers {
            assert!(reader.join().expect("the reader's checks held") > 0);
        }
    }
}

/// A stop (SIGSTOP, a paused VM) on a counter whose rate is off by 100 ppm,
/// fast and slow: the counter and the reference both run 3 s on, and the
/// line, extrapolated at the wrong rate, would be 300 µs off. The windup
/// after it resumes on the reference, ahead as well as behind, and no read
/// steps back.
#[test]
fn a_stop_resumes_on_the_reference_whatever_the_rate_error() {
    const STOP: u64 = 3_000_000_000;
    for hands in RINGS {
        for ppm_off in [-100i64, 100] {
            let (counter, tk) = following(hands);
            // The counter runs `ppm_off` off the frequency it states.
            let counts = |ns: u64| (ns as i128 * (1_000_000 + ppm_off as i128) / 1_000_000) as u64;
            let mut reference = 0u64;
            let mut last = 0;
            for _ in 0..5 {
                counter.advance(counts(1_000_000));
                reference += 1_000_000;
                tk.windup_following(|| BinTime::from_nanos(reference as i128));
                assert!(tk.uptime_nanos() >= last);
                last = tk.uptime_nanos();
            }
            counter.advance(counts(STOP));
            reference += STOP;
            let stood = tk.uptime_nanos();
            assert!(
                stood >= last && stood < reference,
                "{stood} stood at the promise"
            );
            tk.windup_following(|| BinTime::from_nanos(reference as i128));
            let resumed = tk.uptime_nanos();
            assert!(resumed >= stood, "{stood} then {resumed}");
            assert_eq!(resumed, reference, "{ppm_off:+} ppm, {hands} hands");
        }
    }
}

/// Retiring a timekeeper that follows a reference long after its last
/// windup (reads stand at the promise meanwhile) retires it at the time now,
/// not at the promise: its successor does not start behind.
#[test]
fn retiring_long_after_the_last_windup_retires_at_now() {
    for hands in RINGS {
        let (counter, tk) = following(hands);
        counter.advance(10_000_000_000);
        let retired_at = tk.retire().as_nanos();
        assert!(
            (10_000_000_000..=10_002_000_000).contains(&retired_at),
            "{retired_at}"
        );
        counter.advance(5_000_000);
        assert_eq!(tk.uptime().as_nanos(), retired_at);
    }
}
