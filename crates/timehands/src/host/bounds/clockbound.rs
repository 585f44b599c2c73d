//! AWS ClockBound's shared memory: the bound its daemon (`clock-bound-d`
//! 2.x) publishes from chronyd's tracking, at `/var/run/clockbound/shm0`
//! (protocol version 2, the layout of its `docs/PROTOCOL.md`, in the CPU's
//! byte order).
//!
//! [`read`] reads the segment as a file, twice, and keeps it when both
//! reads agree and the generation is even (ClockBound's writer makes it odd
//! while it writes). The bounds' steps, which may run in a signal handler,
//! map it instead and read it with loads under that generation
//! (`look`), as ClockBound's client does.

#[cfg(target_os = "linux")]
use std::ffi::CStr;
use std::io;
use std::path::Path;
use std::time::Duration;

#[cfg(target_os = "linux")]
use super::mapping::{Page, bytes, clockbound_written};

/// Where clock-bound-d 2.x writes its segment.
pub const DEFAULT_PATH: &str = "/var/run/clockbound/shm0";

/// ClockBound's magic number, two u32s in the CPU's byte order.
const MAGIC: [u32; 2] = [0x414D_5A4E, 0x4342_0200];
/// The layout version read here.
const VERSION: u16 = 2;
/// The header (16 bytes) and the bound's record (64).
const SEGMENT_LEN: usize = 80;

/// ClockBound's view of the clock (`ClockStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum ClockBoundStatus {
    /// It does not know: no bound holds.
    Unknown,
    /// chronyd keeps the clock: the bound holds.
    Synchronized,
    /// chronyd stopped updating the clock: the bound holds, and grows.
    FreeRunning,
    /// The VM was disrupted (a live migration): no bound holds.
    Disrupted,
}

/// What ClockBound's daemon published last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ClockBoundReading {
    /// CLOCK_MONOTONIC_COARSE when the bound was computed.
    pub as_of: Duration,
    /// CLOCK_MONOTONIC_COARSE after which the bound is not to be trusted.
    pub void_after: Duration,
    /// The bound on CLOCK_REALTIME's error against UTC at `as_of`.
    pub bound: Duration,
    /// How fast the bound grows after `as_of`, ppb.
    pub max_drift_ppb: u32,
    /// ClockBound's status.
    pub status: ClockBoundStatus,
}

impl ClockBoundReading {
    /// The bound at `monotonic_coarse` (CLOCK_MONOTONIC_COARSE), grown at
    /// `max_drift_ppb` since `as_of` as ClockBound's client grows it; `None`
    /// when ClockBound's status gives none or the reading is void.
    pub fn bound_at(&self, monotonic_coarse: Duration) -> Option<Duration> {
        if !matches!(
            self.status,
            ClockBoundStatus::Synchronized | ClockBoundStatus::FreeRunning
        ) || monotonic_coarse > self.void_after
        {
            return None;
        }
        let age = monotonic_coarse.saturating_sub(self.as_of);
        let growth = age.as_nanos() * u128::from(self.max_drift_ppb) / 1_000_000_000;
        Some(self.bound + Duration::from_nanos(u64::try_from(growth).unwrap_or(u64::MAX)))
    }
}

/// A u32, u16, i64 or u64 at `at`, in the CPU's byte order.
fn ne<const N: usize>(segment: &[u8], at: usize) -> [u8; N] {
    segment[at..at + N].try_into().expect("N bytes")
}

/// A timespec (two i64s) at `at` as a Duration (negative ones as zero).
fn timespec(segment: &[u8], at: usize) -> Duration {
    let seconds = i64::from_ne_bytes(ne(segment, at));
    let nanos = i64::from_ne_bytes(ne(segment, at + 8));
    Duration::new(
        u64::try_from(seconds).unwrap_or(0),
        u32::try_from(nanos.clamp(0, 999_999_999)).unwrap_or(0),
    )
}

/// Why a segment holds no reading (one line each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadSegment {
    /// Shorter than version 2's, bytes.
    Short(usize),
    /// Not ClockBound's magic number.
    Foreign([u32; 2]),
    /// Another layout version.
    Version(u16),
    /// Being written (an odd generation), or never written (0).
    Writing(u16),
}

impl std::fmt::Display for BadSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            BadSegment::Short(n) => write!(
                f,
                "ClockBound's segment is {n} bytes, shorter than version 2's {SEGMENT_LEN}"
            ),
            BadSegment::Foreign([a, b]) => {
                write!(f, "not a ClockBound segment (magic {a:#010x} {b:#010x})")
            }
            BadSegment::Version(version) => write!(
                f,
                "ClockBound's segment is version {version}: timehands reads version {VERSION} (clock-bound-d 2.x)"
            ),
            BadSegment::Writing(generation) => write!(
                f,
                "ClockBound's segment is being written (generation {generation})"
            ),
        }
    }
}

/// The segment's generation, or the reason it cannot be read.
fn generation(segment: &[u8]) -> Result<u16, BadSegment> {
    if segment.len() < SEGMENT_LEN {
        return Err(BadSegment::Short(segment.len()));
    }
    let magic = [
        u32::from_ne_bytes(ne(segment, 0)),
        u32::from_ne_bytes(ne(segment, 4)),
    ];
    if magic != MAGIC {
        return Err(BadSegment::Foreign(magic));
    }
    let version = u16::from_ne_bytes(ne(segment, 12));
    if version != VERSION {
        return Err(BadSegment::Version(version));
    }
    Ok(u16::from_ne_bytes(ne(segment, 14)))
}

/// The reading in `segment`, a whole version-2 segment. Allocates nothing,
/// on either path (a step of the bounds calls it).
///
/// # Errors
/// A segment that is too short, not ClockBound's, of another version, or
/// being written (an odd generation), which says so in one line.
pub(crate) fn parse(segment: &[u8]) -> Result<ClockBoundReading, BadSegment> {
    let generation = generation(segment)?;
    if generation % 2 == 1 || generation == 0 {
        return Err(BadSegment::Writing(generation));
    }
    let bound = i64::from_ne_bytes(ne(segment, 48));
    Ok(ClockBoundReading {
        as_of: timespec(segment, 16),
        void_after: timespec(segment, 32),
        bound: Duration::from_nanos(u64::try_from(bound).unwrap_or(u64::MAX)),
        max_drift_ppb: u32::from_ne_bytes(ne(segment, 64)),
        status: match i32::from_ne_bytes(ne(segment, 68)) {
            1 => ClockBoundStatus::Synchronized,
            2 => ClockBoundStatus::FreeRunning,
            3 => ClockBoundStatus::Disrupted,
            _ => ClockBoundStatus::Unknown,
        },
    })
}

/// [`DEFAULT_PATH`] for `open(2)`.
#[cfg(target_os = "linux")]
pub(crate) const DEFAULT_PATH_C: &CStr = c"/var/run/clockbound/shm0";

/// The reading in the segment `page` maps, now; `None` where there is no
/// segment or it holds none. Loads only, as ClockBound's client reads it.
#[cfg(target_os = "linux")]
pub(crate) fn look(page: &mut Page) -> Option<ClockBoundReading> {
    page.look::<{ SEGMENT_LEN / 8 }, _>(1, clockbound_written, |words| {
        parse(&bytes::<{ SEGMENT_LEN / 8 }, SEGMENT_LEN>(words)).ok()
    })
}

/// ClockBound's last reading from the segment at `path`: read until two
/// reads in a row agree, a few times at most.
///
/// ```
/// use std::path::Path;
/// use timehands::clockbound;
///
/// match clockbound::read(Path::new(clockbound::DEFAULT_PATH)) {
///     Ok(reading) => println!("ClockBound: ± {:?} at {:?}, {:?}", reading.bound, reading.as_of, reading.status),
///     Err(e) => println!("no ClockBound here: {e}"),
/// }
/// ```
///
/// # Errors
/// The file cannot be read (no daemon: it is absent), or holds no reading
/// (too short, not ClockBound's, another version, being written), in one
/// line naming the file.
pub fn read(path: &Path) -> io::Result<ClockBoundReading> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut last = std::fs::read(path).map_err(named)?;
    for _ in 0..8 {
        let again = std::fs::read(path).map_err(named)?;
        // Invariant: a reading is kept only when two whole reads agree and
        // its generation is even, so no half-written record is taken.
        if again == last {
            return parse(&again).map_err(|e| {
                let kind = match e {
                    BadSegment::Writing(_) => io::ErrorKind::WouldBlock,
                    _ => io::ErrorKind::InvalidData,
                };
                named(io::Error::new(kind, e.to_string()))
            });
        }
        last = again;
    }
    Err(named(io::Error::new(
        io::ErrorKind::WouldBlock,
        "ClockBound's segment changed at every read",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-2 segment as clock-bound-d writes it.
    pub(crate) fn segment(generation: u16, status: i32) -> Vec<u8> {
        let mut s = vec![0u8; SEGMENT_LEN];
        s[0..4].copy_from_slice(&MAGIC[0].to_ne_bytes());
        s[4..8].copy_from_slice(&MAGIC[1].to_ne_bytes());
        s[8..12].copy_from_slice(&(SEGMENT_LEN as u32).to_ne_bytes());
        s[12..14].copy_from_slice(&VERSION.to_ne_bytes());
        s[14..16].copy_from_slice(&generation.to_ne_bytes());
        s[16..24].copy_from_slice(&100i64.to_ne_bytes());
        s[24..32].copy_from_slice(&500_000_000i64.to_ne_bytes());
        s[32..40].copy_from_slice(&1100i64.to_ne_bytes());
        s[48..56].copy_from_slice(&91_000i64.to_ne_bytes());
        s[64..68].copy_from_slice(&1_000u32.to_ne_bytes());
        s[68..72].copy_from_slice(&status.to_ne_bytes());
        s
    }

    #[test]
    fn a_segment_is_read_and_its_bound_grows_at_its_drift() {
        let r = parse(&segment(4, 1)).expect("a reading");
        assert_eq!(r.status, ClockBoundStatus::Synchronized);
        assert_eq!(r.as_of, Duration::new(100, 500_000_000));
        assert_eq!(r.bound, Duration::from_micros(91));
        // 1 ppm over 2 s: 2 µs.
        assert_eq!(
            r.bound_at(Duration::new(102, 500_000_000)),
            Some(Duration::from_micros(93))
        );
        assert_eq!(r.bound_at(Duration::from_secs(1101)), None, "void");
        let unknown = parse(&segment(4, 0)).expect("a reading");
        assert_eq!(unknown.bound_at(Duration::from_secs(101)), None);
    }

    #[test]
    fn a_segment_being_written_or_not_clockbounds_is_refused_in_one_line() {
        let mut other = segment(4, 1);
        other[12] = 1;
        let mut foreign = segment(4, 1);
        foreign[0] = 0;
        for (s, says) in [
            (segment(5, 1), "being written"),
            (segment(4, 1)[..40].to_vec(), "shorter"),
            (other, "version 1"),
            (foreign, "not a ClockBound segment"),
        ] {
            let e = parse(&s).expect_err(says).to_string();
            assert!(e.contains(says) && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn a_missing_segment_is_named() {
        let e = read(Path::new("/nonexistent/clockbound/shm0")).expect_err("absent");
        assert!(
            e.to_string().starts_with("/nonexistent/clockbound/shm0: "),
            "{e}"
        );
    }
}
