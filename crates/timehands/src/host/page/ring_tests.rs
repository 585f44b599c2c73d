//! The page in memory, without processes: its slots' seqlock under a
//! writer, its reads (the first segment, a read the keeper overtook, a
//! count behind every hands), and the refusals' one-word form.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Refusal;
use super::layout::{Hands, Page};
use crate::engine::nanos::NanoSegment;

/// A page in memory, for the layout's own tests.
fn page_in_memory() -> Box<Page> {
    // SAFETY: `Page` is all atomics, for which zeroed bytes are a value.
    unsafe { Box::new(std::mem::zeroed()) }
}

/// A hands on a 1 GHz counter that reads `origin + count` ns, numbered `n`
/// in its offsets.
fn hands(n: u64) -> Hands {
    let segment = NanoSegment::new(
        n * 1_000,
        1_000_000,
        crate::BinTime::from_nanos(n as i128 * 1_000),
        1 << 34,
        u64::MAX,
    );
    Hands {
        segments: [segment, NanoSegment::NONE, NanoSegment::NONE],
        realtime: n as i64,
        boottime: n as i64 * 2,
        tai: n as i64 * 3,
        end_ns: n * 4,
        bound_ns: n * 5,
        bound_ppb: n * 6,
        bound_since: n * 7,
        realtime_uncertainty: n * 8,
        leap: n % 4,
        base: n * 1_000,
        kernel_rate_ppb: n as i64 * 9,
        rate_asked_at: n * 10,
        boottime_uncertainty: n * 11,
    }
}

#[test]
fn a_page_reads_back_each_hands_whole_while_one_keeper_publishes() {
    let page = page_in_memory();
    assert_eq!(page.newest(), None, "a page no keeper wrote holds no hands");
    page.publish(&hands(1));
    assert_eq!(page.newest(), Some(hands(1)));
    let writes = if cfg!(miri) { 100 } else { 100_000 };
    let seen = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for n in 2..writes {
                page.publish(&hands(n));
            }
        });
        s.spawn(|| {
            let mut last = 0;
            while last < writes - 1 {
                if let Some(read) = page.newest() {
                    let n = read.realtime as u64;
                    assert_eq!(read, hands(n), "a hands mixed of two");
                    last = last.max(n);
                    seen.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    });
    assert!(seen.load(Ordering::Relaxed) > 0);
}

#[test]
fn the_first_segment_reads_as_the_whole_hands_does() {
    let page = page_in_memory();
    page.publish(&hands(3));
    for count in [3_000, 3_001, 500_000, 1_002_999] {
        let whole = page.newest().unwrap().nanos_at(count);
        assert_eq!(page.nanos_at::<false>(count), whole);
        assert_eq!(page.nanos_at::<true>(count), whole.map(|ns| ns + 3));
    }
    assert_eq!(page.nanos_at::<false>(1_003_000), None, "past the segment");
    assert_eq!(page.nanos_at::<false>(2_999), None, "before it");
}

#[test]
fn every_refusal_is_kept_in_one_word() {
    for refusal in [
        Refusal::Unsupported,
        Refusal::BadPath,
        Refusal::Open(2),
        Refusal::NotAFile,
        Refusal::Short(8),
        Refusal::WritableByOthers,
        Refusal::DirectoryWritableByOthers,
        Refusal::Owner {
            file: 65534,
            directory: 1000,
        },
        Refusal::NotAPage,
        Refusal::Version(2),
        Refusal::Counter(7),
        Refusal::OtherBoot,
        Refusal::Stale,
        Refusal::Disagrees(-86_400_000_000_000),
        Refusal::Keeper,
        Refusal::Left,
        Refusal::Started,
    ] {
        assert_eq!(Refusal::from_code(refusal.code()), refusal);
    }
}

/// A hands on a 1 GHz-ish counter from `base` for `len` counts, at
/// `at_base` ns there.
fn hands_at(base: u64, len: u64, at_base: u64) -> Hands {
    Hands {
        segments: [
            NanoSegment::new(
                base,
                len,
                crate::BinTime::from_nanos(at_base as i128),
                1 << 34,
                u64::MAX,
            ),
            NanoSegment::NONE,
            NanoSegment::NONE,
        ],
        base,
        end_ns: at_base + len,
        ..hands(0)
    }
}

/// The readers' word of an in-memory page.
fn word_of(page: &Page) -> usize {
    std::ptr::from_ref(page) as usize | super::PAGE | super::super::published::LFENCE_RDTSC
}

#[test]
fn a_read_the_keeper_overtook_takes_the_hands_that_started_last_before_it() {
    let page = page_in_memory();
    // Three hands, the newest started after the read's count; the two
    // older ones both cover it, and disagree there (the middle one changed
    // the rate), in slots 1 and 2: the middle one is the time.
    let (oldest, middle, newest) = (
        hands_at(0, 1_000_000, 0),
        hands_at(400_000, 1_000_000, 400_100),
        hands_at(800_000, 1_000_000, 800_200),
    );
    for hands in [&oldest, &middle, &newest] {
        page.publish(hands);
    }
    let count = 700_000;
    assert_ne!(oldest.nanos_at(count), middle.nanos_at(count));
    let (ns, leave) = super::read_slow::<false>(word_of(&page), count);
    assert_eq!(Some(ns), middle.nanos_at(count));
    assert_eq!(leave, None);
}

#[test]
fn a_count_behind_every_hands_takes_the_earliest_start_or_the_kernels_time_and_leaves_a_gone_keeper()
 {
    let page = page_in_memory();
    page.publish(&hands_at(2_000_000, 1_000_000, 5_000));
    page.publish(&hands_at(3_000_000, 1_000_000, 6_000));
    let kernel = || crate::os::kernel_nanos(crate::os::KernelClock::Monotonic).unwrap_or(0);
    let before = kernel();
    let (ns, leave) = super::read_slow::<false>(word_of(&page), 1_000);
    let after = kernel();
    // The earliest start (5 µs) is long past: the kernel's time less the
    // slack, not a time that stands; and the keeper, whose hands ended
    // long ago, is left.
    assert!(
        ns + super::slack_ns() >= before && ns <= after,
        "{ns} vs {before}..{after}"
    );
    assert!(leave.is_some());
}

#[test]
fn a_read_that_no_hands_covers_takes_no_more_than_the_hands_that_started_gave_by_its_count() {
    let kernel = || crate::os::kernel_nanos(crate::os::KernelClock::Monotonic).unwrap_or(0);
    let now = kernel();
    // Started at count 0, its one segment from count 1,000,000 (its
    // first piece left out), ending 10 ms ahead of the kernel: a read at
    // count 500,000 is in the hole, and no read of it by then gave more
    // than the kernel's time (a read that took its end did, 10 ms ahead).
    let ahead = Hands {
        base: 0,
        end_ns: now + 10_000_000,
        realtime: 1_796_000_000_000_000_000,
        ..hands_at(1_000_000, 10_000_000, now)
    };
    let ring = [Some(ahead), None, None, None];
    let before = kernel();
    let ((ns, realtime), leave) = super::stale(&ring, 500_000);
    let after = kernel();
    assert!(
        ns + super::slack_ns() >= before && ns <= after,
        "{ns} vs {before}..{after}"
    );
    assert_eq!(realtime, ahead.realtime, "Realtime's offset of the hands");
    assert_eq!(leave, None, "its end is ahead: the keeper is not gone");
    // Past its segment, the latest it gave: its end.
    assert_eq!(ahead.latest_by(20_000_000), ahead.nanos_at(10_999_999));
    assert_eq!(ahead.latest_by(999_999), None);
}

#[test]
fn getres_on_the_page_widens_by_a_kernel_rate_change_the_keeper_has_not_followed() {
    let followed = Hands {
        kernel_rate_ppb: 1_000,
        rate_asked_at: 1_000_000_000,
        ..hands(0)
    };
    let at = |ns: u64| 1_000_000_000 + ns;
    assert_eq!(followed.unfollowed_change_ns(Some(1_000), at(5_000_000)), 0);
    // 20 ppm apart for 5 ms: 100 ns; rounded up.
    assert_eq!(
        followed.unfollowed_change_ns(Some(-19_000), at(5_000_000)),
        100
    );
    assert_eq!(followed.unfollowed_change_ns(Some(1_001), at(1)), 1);
    // A kernel that says nothing, or a keeper that could not ask: nothing
    // to compare.
    assert_eq!(followed.unfollowed_change_ns(None, at(5_000_000)), 0);
    let unasked = Hands {
        kernel_rate_ppb: super::layout::RATE_UNKNOWN,
        ..followed
    };
    assert_eq!(unasked.unfollowed_change_ns(Some(0), at(5_000_000)), 0);
}
