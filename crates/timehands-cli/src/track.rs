//! `timehands track`: timehands' `now()` against the kernel's monotonic clock
//! (Linux's CLOCK_MONOTONIC) over time.
//!
//! At every interval one bracketed comparison (the narrowest of a few
//! `kernel, ours, kernel`) gives the offset, ours minus the kernel's, to
//! within half its bracket. The frequency error at a sample is how fast the
//! offset moved over the second before it (in ppm); over the whole run it is
//! the slope of the least-squares line through the offsets. A clock that
//! keeps to the kernel shows offsets within the brackets and a slope near 0.
//!
//! `--kernel-rate` changes the kernel clock's rate meanwhile, as NTP daemons
//! do (Linux's `adjtimex`, root only): by PPM from `--change-at` for
//! `--hold`, then by -PPM for as long (so that Realtime ends where it would
//! have), then back to what it was, also on Ctrl-C or an error. The table
//! shows the rate at each sample, and the summary how long after the change
//! ended our clock was back within 1 µs.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::bracket;
use crate::clocks::Clock;
use crate::output::{self, OutFile};
use crate::plot::{self, Chart, Series};
use crate::progress;
use crate::summary::Summary;

/// Brackets per sample; the narrowest is kept.
const BRACKETS: usize = 5;

/// The most samples a run takes: they are held in memory until the end.
const MAX_SAMPLES: u128 = 1_000_000;

/// The frequency error at a sample is taken over this much time before it.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// Flags of `timehands track`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  timehands track                        10 s, a sample every 100 ms
  timehands track -D 60 --interval 500 --out track.svg
  timehands track -D 2 --json | jq .summary
  timehands track --busy                 with a thread reading now() all the while
  sudo timehands track --busy --interval 10 -D 4 --kernel-rate 83333 --hold 0.5
                                         the kernel slewing as chrony does, and back")]
pub struct Args {
    /// How long to track, in seconds.
    #[arg(short = 'D', long, value_name = "SECONDS", default_value_t = 10.0, value_parser = seconds, allow_negative_numbers = true)]
    pub duration: f64,
    /// Time between samples, in ms.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=3_600_000), allow_negative_numbers = true)]
    pub interval: u64,
    /// A thread reads `now()` all the while, as in a busy program: the clock
    /// winds up (and steers) every few milliseconds. Without it, the clock
    /// winds up only at the samples, as in a program that reads seldom.
    #[arg(long)]
    pub busy: bool,
    /// Change the kernel clock's rate by PPM meanwhile (±100000, that is
    /// ±10 %; chrony slews at 83333), then by -PPM, then back: root only.
    #[arg(long, value_name = "PPM", value_parser = kernel_ppm, allow_negative_numbers = true)]
    pub kernel_rate: Option<i64>,
    /// With --kernel-rate, when the change starts, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = seconds, requires = "kernel_rate")]
    pub change_at: f64,
    /// With --kernel-rate, how long each change lasts, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = seconds, requires = "kernel_rate")]
    pub hold: f64,
    /// Also write an SVG plot of the offset and the frequency error to FILE.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Parses a positive, finite number of seconds, at most a day.
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86_400.0 => Ok(s),
        _ => Err("give seconds as a number above 0 and at most 86400, such as 10 or 0.5".into()),
    }
}

/// Parses a change of the kernel's rate in ppm: not 0, within ±10 %.
fn kernel_ppm(text: &str) -> Result<i64, String> {
    match text.parse::<i64>() {
        Ok(ppm) if ppm != 0 && ppm.abs() <= 100_000 => Ok(ppm),
        _ => Err("give a whole number of ppm, not 0, within ±100000 (±10 %), such as 83333".into()),
    }
}

/// The kernel clock's rate as `--kernel-rate` changes it, set back to what
/// it was when dropped (at the end, on an error, after Ctrl-C).
struct KernelRateChange {
    was: timehands::sys::KernelRate,
    ppm: i64,
    at: Duration,
    hold: Duration,
    /// The change in force: -1, 0 or 1 times `ppm`.
    now: i64,
}

impl KernelRateChange {
    /// The kernel's rate as it is, to change by `ppm` from `at` for `hold`;
    /// refused before anything changes where a leg would not fit the
    /// kernel's ranges.
    fn new(ppm: i64, at: Duration, hold: Duration) -> anyhow::Result<KernelRateChange> {
        let was = timehands::sys::kernel_rate().context("--kernel-rate")?;
        for sign in [1, -1] {
            let leg = timehands::sys::KernelRate::of_ppb(was.rate_ppb() + sign * ppm * 1_000);
            if !(9_000..=11_000).contains(&leg.tick_us) || leg.frequency.abs() > 500 * 65_536 {
                bail!(
                    "--kernel-rate {ppm}: from the kernel's rate now ({} ppm) one leg needs a tick of {} µs and a frequency of {:.1} ppm, beyond 9000 to 11000 µs and ±500 ppm: give a smaller change",
                    was.rate_ppb() as f64 / 1e3,
                    leg.tick_us,
                    leg.frequency as f64 / 65_536.0
                );
            }
        }
        Ok(KernelRateChange {
            was,
            ppm,
            at,
            hold,
            now: 0,
        })
    }

    /// Sets the rate that `elapsed` into the run calls for, if it is
    /// another; returns the change in force, in ppm.
    fn follow(&mut self, elapsed: Duration) -> anyhow::Result<i64> {
        let sign = if elapsed < self.at {
            0
        } else if elapsed < self.at + self.hold {
            1
        } else if elapsed < self.at + 2 * self.hold {
            -1
        } else {
            0
        };
        if sign != self.now {
            let rate =
                timehands::sys::KernelRate::of_ppb(self.was.rate_ppb() + sign * self.ppm * 1_000);
            timehands::sys::set_kernel_rate(rate).context("--kernel-rate")?;
            self.now = sign;
        }
        Ok(sign * self.ppm)
    }

    /// When the change is over, in seconds into the run.
    fn ends(&self) -> f64 {
        (self.at + 2 * self.hold).as_secs_f64()
    }
}

impl Drop for KernelRateChange {
    fn drop(&mut self) {
        if self.now != 0 {
            if let Err(e) = timehands::sys::set_kernel_rate(self.was) {
                eprintln!("timehands: the kernel clock's rate could not be set back: {e}");
            }
        }
    }
}

/// One sample.
#[derive(Serialize)]
struct Sample {
    /// Seconds since the first sample.
    t_s: f64,
    /// Ours minus the kernel's monotonic clock, in ns.
    offset_ns: i64,
    /// The bracket's width, in ns.
    bracket_ns: u64,
    /// The offset's rate of change over the window before this sample, in
    /// ppm; `None` for the first sample.
    frequency_error_ppm: Option<f64>,
    /// The change of the kernel clock's rate in force, ppm (with
    /// `--kernel-rate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_rate_ppm: Option<i64>,
}

/// What the run comes to.
#[derive(Serialize)]
struct Totals {
    samples: usize,
    /// The offsets' figures, in ns.
    offset_ns: Summary,
    /// The largest |offset|, in ns.
    max_abs_offset_ns: u64,
    /// The widest bracket, in ns.
    max_bracket_ns: u64,
    /// The least-squares slope of the offsets over the run, in ppm; `None`
    /// for a single sample.
    frequency_error_ppm: Option<f64>,
    /// With `--kernel-rate`: the largest |offset| while the kernel's rate
    /// was changed, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_abs_offset_during_change_ns: Option<u64>,
    /// With `--kernel-rate`: how long after the change ended the offset
    /// was last more than 1 µs beyond half its bracket, s (0: never; none
    /// where no sample came after it).
    #[serde(skip_serializing_if = "Option::is_none")]
    settled_after_change_s: Option<f64>,
}

/// The run, as JSON names it.
#[derive(Serialize)]
struct Run {
    clock: &'static str,
    against: &'static str,
    interval_ms: u64,
    /// Whether a thread read `now()` all the while.
    busy: bool,
    summary: Totals,
    samples: Vec<Sample>,
}

/// Runs `timehands track`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let out = args.out.as_deref().map(OutFile::create).transpose()?;
    let interval = Duration::from_millis(args.interval);
    let duration = Duration::from_secs_f64(args.duration);
    let count = duration.as_nanos() / interval.as_nanos() + 1;
    if count > MAX_SAMPLES {
        bail!(
            "--duration {} s at --interval {} ms makes {count} samples, at most {MAX_SAMPLES}: give a longer --interval",
            args.duration,
            args.interval
        );
    }
    let mut change = match args.kernel_rate {
        Some(ppm) => {
            if args.change_at + 2.0 * args.hold > args.duration {
                bail!(
                    "--change-at {} s and twice --hold {} s end after --duration {} s: give a longer --duration",
                    args.change_at,
                    args.hold,
                    args.duration
                );
            }
            let stop = crate::interrupt::stop_on_interrupt()?;
            let change = KernelRateChange::new(
                ppm,
                Duration::from_secs_f64(args.change_at),
                Duration::from_secs_f64(args.hold),
            )?;
            Some((change, stop))
        }
        None => None,
    };
    let count = count as usize;
    let progress = progress::bar("track", count as u64, duration);
    let window = (RATE_WINDOW.as_nanos() / interval.as_nanos()).max(1) as usize;
    let (ours, kernel) = (Clock::Now, Clock::KernelMonotonic);
    let busy = args.busy.then(BusyReader::start);
    let start = Instant::now();
    let mut offsets: Vec<bracket::Offset> = Vec::with_capacity(count);
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        let due = start + interval * i as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        let kernel_rate_ppm = match &mut change {
            Some((change, stop)) if !stop.load(std::sync::atomic::Ordering::Relaxed) => {
                Some(change.follow(start.elapsed())?)
            }
            Some(_) => break,
            None => None,
        };
        let now = bracket::offset(ours, kernel, BRACKETS);
        let first = offsets.first().copied().unwrap_or(now);
        let frequency_error_ppm = i
            .checked_sub(window)
            .or((i > 0).then_some(0))
            .map(|back| rate_ppm(&offsets[back], &now));
        samples.push(Sample {
            t_s: now.kernel_ns.saturating_sub(first.kernel_ns) as f64 / 1e9,
            offset_ns: now.offset_ns,
            bracket_ns: now.bracket_ns,
            frequency_error_ppm,
            kernel_rate_ppm,
        });
        offsets.push(now);
        progress.inc(1);
    }
    progress.finish_and_clear();
    drop(busy);
    let ends = change.as_ref().map(|(change, _)| change.ends());
    drop(change);
    let run = Run {
        clock: ours.label(),
        against: kernel.label(),
        interval_ms: args.interval,
        busy: args.busy,
        summary: totals(&samples, ends)?,
        samples,
    };
    output::print_json_or_text(args.json, &run, Run::text)?;
    if let Some(file) = out {
        file.write(&run.plot()?)?;
    }
    Ok(())
}

/// A thread that reads `now()` until dropped, as a busy program does.
struct BusyReader {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl BusyReader {
    fn start() -> BusyReader {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::black_box(timehands::now());
                }
            })
        };
        BusyReader {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for BusyReader {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How fast the offset moved from `earlier` to `later`, in ppm of the
/// kernel's time between them.
fn rate_ppm(earlier: &bracket::Offset, later: &bracket::Offset) -> f64 {
    let moved = (later.offset_ns - earlier.offset_ns) as f64;
    let elapsed = later.kernel_ns.saturating_sub(earlier.kernel_ns).max(1) as f64;
    moved / elapsed * 1e6
}

fn totals(samples: &[Sample], change_ends_s: Option<f64>) -> anyhow::Result<Totals> {
    let offsets: Vec<f64> = samples.iter().map(|s| s.offset_ns as f64).collect();
    Ok(Totals {
        samples: samples.len(),
        offset_ns: Summary::of(&offsets).context("no samples taken")?,
        max_abs_offset_ns: samples
            .iter()
            .map(|s| s.offset_ns.unsigned_abs())
            .max()
            .unwrap_or(0),
        max_bracket_ns: samples.iter().map(|s| s.bracket_ns).max().unwrap_or(0),
        frequency_error_ppm: slope(samples).map(|per_s| per_s / 1e3),
        max_abs_offset_during_change_ns: change_ends_s.map(|_| {
            samples
                .iter()
                .filter(|s| s.kernel_rate_ppm.is_some_and(|ppm| ppm != 0))
                .map(|s| s.offset_ns.unsigned_abs())
                .max()
                .unwrap_or(0)
        }),
        settled_after_change_s: change_ends_s
            .filter(|&ends| samples.iter().any(|s| s.t_s >= ends))
            .map(|ends| {
                samples
                    .iter()
                    .filter(|s| s.t_s >= ends && beyond_bracket(s) > 1_000)
                    .map(|s| s.t_s - ends)
                    .fold(0.0, f64::max)
            }),
    })
}

/// How far a sample's offset is beyond half its bracket, ns: what it is
/// off for sure.
fn beyond_bracket(sample: &Sample) -> u64 {
    sample
        .offset_ns
        .unsigned_abs()
        .saturating_sub(sample.bracket_ns.div_ceil(2))
}

/// The least-squares slope of offset (ns) against time (s), in ns per s;
/// `None` when the samples span no time.
fn slope(samples: &[Sample]) -> Option<f64> {
    let n = samples.len() as f64;
    let mean_t = samples.iter().map(|s| s.t_s).sum::<f64>() / n;
    let mean_offset = samples.iter().map(|s| s.offset_ns as f64).sum::<f64>() / n;
    let (mut covariance, mut variance) = (0.0, 0.0);
    for s in samples {
        let dt = s.t_s - mean_t;
        covariance += dt * (s.offset_ns as f64 - mean_offset);
        variance += dt * dt;
    }
    (variance > 0.0).then(|| covariance / variance)
}

impl Run {
    fn text(&self) -> String {
        let mut text = format!(
            "{} minus {}, a sample every {} ms{} (offset exact within half the bracket)\n",
            self.clock,
            self.against,
            self.interval_ms,
            if self.busy {
                ", a thread reading now() all the while"
            } else {
                ""
            }
        );
        let changed = self.summary.max_abs_offset_during_change_ns.is_some();
        let _ = write!(
            text,
            "{:>9} {:>12} {:>11} {:>16}",
            "t s", "offset ns", "bracket ns", "freq error ppm"
        );
        if changed {
            text.push_str("  kernel rate ppm");
        }
        text.push('\n');
        for s in &self.samples {
            let rate = s
                .frequency_error_ppm
                .map_or_else(|| "-".to_string(), |r| format!("{r:.3}"));
            let _ = write!(
                text,
                "{:>9.3} {:>12} {:>11} {:>16}",
                s.t_s, s.offset_ns, s.bracket_ns, rate
            );
            if let Some(ppm) = s.kernel_rate_ppm {
                let _ = write!(text, "  {ppm:>15}");
            }
            text.push('\n');
        }
        let t = &self.summary;
        let o = &t.offset_ns;
        let _ = writeln!(text, "summary");
        let _ = writeln!(text, "  samples          {}", t.samples);
        let _ = writeln!(
            text,
            "  offset ns        min {:.0}  median {:.0}  max {:.0}  (largest |offset| {})",
            o.min, o.median, o.max, t.max_abs_offset_ns
        );
        let _ = writeln!(text, "  widest bracket   {} ns", t.max_bracket_ns);
        if let Some(during) = t.max_abs_offset_during_change_ns {
            let after = t.settled_after_change_s.map_or_else(
                || "no sample after it ended".to_string(),
                |s| format!("within 1 µs {s:.3} s after it ended"),
            );
            let _ = writeln!(
                text,
                "  kernel's rate    changed: largest |offset| {during} ns meanwhile; {after}"
            );
        }
        match t.frequency_error_ppm {
            Some(ppm) => {
                let _ = writeln!(text, "  frequency error  {ppm:.4} ppm (slope over the run)");
            }
            None => {
                let _ = writeln!(text, "  frequency error  - (one sample)");
            }
        }
        text
    }

    fn plot(&self) -> anyhow::Result<String> {
        let series = |name: &str, points: Vec<(f64, f64)>| Series {
            name: name.to_string(),
            points,
        };
        plot::lines(&[
            Chart {
                title: format!("{} minus {}", self.clock, self.against),
                x: "seconds".into(),
                whole_x: false,
                y: "offset (ns)".into(),
                series: vec![series(
                    "offset",
                    self.samples
                        .iter()
                        .map(|s| (s.t_s, s.offset_ns as f64))
                        .collect(),
                )],
            },
            Chart {
                title: format!("Frequency error over the last {RATE_WINDOW:?}"),
                x: "seconds".into(),
                whole_x: false,
                y: "ppm".into(),
                series: vec![series(
                    "frequency error",
                    self.samples
                        .iter()
                        .filter_map(|s| Some((s.t_s, s.frequency_error_ppm?)))
                        .collect(),
                )],
            },
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_s: f64, offset_ns: i64) -> Sample {
        Sample {
            t_s,
            offset_ns,
            bracket_ns: 50,
            frequency_error_ppm: None,
            kernel_rate_ppm: None,
        }
    }

    #[test]
    fn the_slope_of_offsets_on_a_line_is_the_line_s() {
        // 250 ns more every second: 0.25 ppm.
        let samples: Vec<Sample> = (0..5)
            .map(|i| at(f64::from(i) * 0.5, -1000 + 125 * i64::from(i)))
            .collect();
        let per_s = slope(&samples).expect("a slope");
        assert!((per_s - 250.0).abs() < 1e-9, "{per_s}");
        let totals = totals(&samples, None).expect("samples");
        assert_eq!(totals.max_abs_offset_ns, 1000);
        assert!((totals.frequency_error_ppm.expect("a rate") - 0.25).abs() < 1e-12);
    }

    #[test]
    fn one_sample_has_no_slope() {
        assert!(slope(&[at(0.0, 7)]).is_none());
        assert!(totals(&[], None).is_err());
    }

    /// With the kernel's rate changed, the summary has the largest offset
    /// while it was, and when the offset was last beyond 1 µs (more than
    /// half its bracket) after the change ended.
    #[test]
    fn a_change_of_the_kernels_rate_is_summed_up() {
        let mut samples = vec![at(0.0, 3), at(0.5, -2_000_000), at(1.0, 400_000)];
        samples[1].kernel_rate_ppm = Some(83_333);
        samples[2].kernel_rate_ppm = Some(0);
        samples.extend([at(1.1, 1_026), at(1.2, 1_024), at(1.3, 2)]);
        let totals = totals(&samples, Some(1.0)).expect("samples");
        assert_eq!(totals.max_abs_offset_during_change_ns, Some(2_000_000));
        let after = totals.settled_after_change_s.expect("settled");
        assert!((after - 0.1).abs() < 1e-9, "{after}");
    }

    #[test]
    fn rate_between_two_offsets_is_over_the_kernel_s_time() {
        let earlier = bracket::Offset {
            kernel_ns: 1_000_000_000,
            offset_ns: 100,
            bracket_ns: 40,
        };
        let later = bracket::Offset {
            kernel_ns: 1_100_000_000,
            offset_ns: 50,
            bracket_ns: 40,
        };
        // 50 ns lost in 100 ms: -0.5 ppm.
        assert!((rate_ppm(&earlier, &later) + 0.5).abs() < 1e-12);
    }
}
