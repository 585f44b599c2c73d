//! The side-by-side test's own pieces (`scripts/bounds-vs-clockbound.sh`):
//! an NTP server on loopback whose true time it knows, a sampler that holds
//! timehands' bounds, ClockBound 2's and ClockBound 3's against that truth
//! and times a call of each, and the save and restore of the kernel's clock
//! around it. Linux, root for `restore`.
//!
//! The truth is CLOCK_MONOTONIC_RAW plus a fixed offset `K` (ns), taken as
//! CLOCK_REALTIME − CLOCK_MONOTONIC_RAW when the run starts (`save`): no
//! daemon slews CLOCK_MONOTONIC_RAW, so the truth runs on whatever the
//! machine's clock is made to do. `--step-ns N --step-at-raw-ns T` steps
//! the truth by N from CLOCK_MONOTONIC_RAW's T on, for the server and the
//! sampler alike.
//!
//! ```text
//! bounds_truth save                         tick freq status K
//! bounds_truth raw                          CLOCK_MONOTONIC_RAW, ns
//! bounds_truth clients                      the ClockBound clients it has
//! bounds_truth serve --port P --k K [--reply-delay-us D] [--step-ns N --step-at-raw-ns T]
//! bounds_truth sample --k K --seconds S --phase NAME [--clockbound3 SHM1]
//! bounds_truth restore TICK FREQ STATUS K   the clock back on the truth
//! ```

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    linux::main()
}

#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    eprintln!("bounds_truth: Linux only (adjtimex, CLOCK_MONOTONIC_RAW, ClockBound)");
    std::process::ExitCode::FAILURE
}

/// Everything: Linux's clocks and `adjtimex`, and ClockBound's client.
#[cfg(target_os = "linux")]
mod linux {
    use std::net::UdpSocket;
    use std::time::Duration;

    use anyhow::{Context, Result, bail};
    use clap::{Parser, Subcommand};
    use clock_bound_client::{ClockBoundClient, ClockStatus};
    use serde_json::json;
    use std::hint::black_box;
    use std::time::Instant;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Prints the kernel's tick (µs), frequency (adjtimex units), status,
        /// and K = CLOCK_REALTIME − CLOCK_MONOTONIC_RAW (ns).
        Save,
        /// Prints CLOCK_MONOTONIC_RAW (ns), the clock the truth runs on.
        Raw,
        /// Answers NTP on 127.0.0.1:PORT with the truth, stratum 1.
        Serve {
            #[arg(long)]
            port: u16,
            #[command(flatten)]
            truth: Truth,
            /// Each reply leaves this long after its transmit time was taken:
            /// an asymmetric path, which NTP cannot see (it takes the clock
            /// half of it off), but which its delay bounds.
            #[arg(long, default_value_t = 0)]
            reply_delay_us: u64,
        },
        /// Samples the bounds against the truth every 20 ms, and times a
        /// call of each reader there; prints one JSON line of figures, and
        /// each false bound on stderr.
        /// The ClockBound clients it was built with: `clockbound2`, and
        /// `clockbound3` with the feature of that name.
        Clients,
        Sample {
            #[command(flatten)]
            truth: Truth,
            #[arg(long)]
            seconds: f64,
            #[arg(long)]
            phase: String,
            #[arg(long, default_value_t = 20)]
            interval_ms: u64,
            /// Appends a line "timehands ClockBound" of half-widths (ns) to
            /// this file for each sample where both gave a bound.
            #[arg(long)]
            pairs: Option<std::path::PathBuf>,
            /// ClockBound 3's page (its `shm1`), read with its own client;
            /// without it, no ClockBound 3.
            #[arg(long)]
            clockbound3: Option<String>,
            /// Appends a line "timehands ClockBound3" of half-widths (ns) to
            /// this file for each sample where both gave a bound.
            #[arg(long)]
            pairs_clockbound3: Option<std::path::PathBuf>,
        },
        /// Sets the tick, frequency and status saved, and steps CLOCK_REALTIME
        /// onto the truth.
        Restore {
            tick: i64,
            freq: i64,
            status: i32,
            #[arg(allow_hyphen_values = true)]
            k: i64,
        },
    }

    /// The truth: CLOCK_MONOTONIC_RAW plus `k`, and plus `step_ns` from
    /// CLOCK_MONOTONIC_RAW's `step_at_raw_ns` on.
    #[derive(clap::Args, Clone, Copy)]
    struct Truth {
        /// The truth's offset from CLOCK_MONOTONIC_RAW, ns.
        #[arg(long, allow_hyphen_values = true)]
        k: i64,
        /// A step of the truth, ns.
        #[arg(long, allow_hyphen_values = true, default_value_t = 0)]
        step_ns: i64,
        /// When the truth steps, in CLOCK_MONOTONIC_RAW's ns.
        #[arg(long, default_value_t = i64::MAX)]
        step_at_raw_ns: i64,
    }

    impl Truth {
        /// The truth now, ns since the epoch.
        fn now(&self) -> i64 {
            let raw = clock_ns(libc::CLOCK_MONOTONIC_RAW);
            raw + self.k
                + if raw >= self.step_at_raw_ns {
                    self.step_ns
                } else {
                    0
                }
        }
    }

    /// A kernel clock, ns.
    fn clock_ns(id: libc::clockid_t) -> i64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write.
        unsafe { libc::clock_gettime(id, &mut ts) };
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }

    /// The truth without a step now, ns since the epoch.
    fn truth(k: i64) -> i64 {
        clock_ns(libc::CLOCK_MONOTONIC_RAW) + k
    }

    /// The kernel's NTP state (`adjtimex` with `modes`, from `tx`).
    fn adjtimex(tx: &mut libc::timex) -> Result<i32> {
        // SAFETY: `tx` is a valid timex; its modes say what is set.
        let state = unsafe { libc::adjtimex(tx) };
        if state < 0 {
            bail!("adjtimex: {}", std::io::Error::last_os_error());
        }
        Ok(state)
    }

    fn save() -> Result<()> {
        // SAFETY: a zeroed timex is a valid read-only request.
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        adjtimex(&mut tx)?;
        let k = clock_ns(libc::CLOCK_REALTIME) - clock_ns(libc::CLOCK_MONOTONIC_RAW);
        println!("{} {} {} {k}", tx.tick, tx.freq, tx.status);
        Ok(())
    }

    fn restore(tick: i64, freq: i64, status: i32, k: i64) -> Result<()> {
        // SAFETY: a zeroed timex is valid; the modes say which fields are set.
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        // STA_NANO is no status bit to set: ADJ_NANO or ADJ_MICRO sets it
        // (chronyd leaves the kernel in nanoseconds).
        let unit = if status & libc::STA_NANO != 0 {
            libc::ADJ_NANO
        } else {
            libc::ADJ_MICRO
        };
        tx.modes = libc::ADJ_TICK | libc::ADJ_FREQUENCY | libc::ADJ_STATUS | unit;
        tx.tick = tick;
        tx.freq = freq;
        tx.status = status;
        adjtimex(&mut tx).context("setting the tick, frequency and status back")?;
        let now = truth(k);
        let ts = libc::timespec {
            tv_sec: now.div_euclid(1_000_000_000),
            tv_nsec: now.rem_euclid(1_000_000_000),
        };
        // SAFETY: `ts` is a valid timespec.
        if unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &ts) } != 0 {
            bail!("clock_settime: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Seconds between 1900 (NTP's era) and 1970.
    const NTP_UNIX: i64 = 2_208_988_800;

    /// `ns` since the Unix epoch as an NTP timestamp (32.32 fixed point).
    fn ntp_timestamp(ns: i64) -> [u8; 8] {
        let seconds = (ns.div_euclid(1_000_000_000) + NTP_UNIX) as u32;
        let fraction = ((ns.rem_euclid(1_000_000_000) as u64) << 32) / 1_000_000_000;
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&seconds.to_be_bytes());
        out[4..].copy_from_slice(&(fraction as u32).to_be_bytes());
        out
    }

    fn serve(port: u16, truth: Truth, reply_delay: Duration) -> Result<()> {
        let socket =
            UdpSocket::bind(("127.0.0.1", port)).with_context(|| format!("port {port}"))?;
        let mut request = [0u8; 512];
        loop {
            let (n, client) = socket.recv_from(&mut request)?;
            let received = truth.now();
            // Mode 3 (client) only.
            if n < 48 || request[0] & 7 != 3 {
                continue;
            }
            let mut reply = [0u8; 48];
            reply[0] = (4 << 3) | 4; // no leap warning, version 4, server
            reply[1] = 1; // stratum 1
            reply[2] = request[2]; // poll
            reply[3] = (-20i8) as u8; // precision ~1 µs
            // Root delay and dispersion: 0 (the truth itself).
            reply[12..16].copy_from_slice(b"TRUE");
            reply[16..24].copy_from_slice(&ntp_timestamp(received));
            reply[24..32].copy_from_slice(&request[40..48]); // origin
            reply[32..40].copy_from_slice(&ntp_timestamp(received));
            reply[40..48].copy_from_slice(&ntp_timestamp(truth.now()));
            if !reply_delay.is_zero() {
                std::thread::sleep(reply_delay);
            }
            socket.send_to(&reply, client)?;
        }
    }

    /// One side's figures over a phase.
    #[derive(Default)]
    struct Side {
        bounds: u64,
        none: u64,
        false_bounds: u64,
        half_widths: Vec<u64>,
    }

    impl Side {
        /// Counts a bound `[earliest, latest]` (ns) against a truth known to
        /// be within `[truth_lo, truth_hi]`; returns whether it was false.
        fn count(&mut self, bound: Option<(i64, i64)>, truth_lo: i64, truth_hi: i64) -> bool {
            let Some((earliest, latest)) = bound else {
                self.none += 1;
                return false;
            };
            self.bounds += 1;
            self.half_widths.push(((latest - earliest) / 2) as u64);
            let false_bound = latest < truth_lo || earliest > truth_hi;
            self.false_bounds += u64::from(false_bound);
            false_bound
        }
    }

    fn median(values: &mut [u64]) -> Option<u64> {
        values.sort_unstable();
        values.get(values.len() / 2).copied()
    }

    /// Calls a batch of `CALLS` reads takes, timed once.
    const CALLS: u32 = 32;

    /// The cost of one call of `read` (ns, in tenths), from a batch timed
    /// with `Instant` (whose own read is spread over the batch).
    fn cost_per_call<T>(mut read: impl FnMut() -> T) -> u64 {
        let start = Instant::now();
        for _ in 0..CALLS {
            black_box(read());
        }
        (start.elapsed().as_nanos() * 10 / u128::from(CALLS)) as u64
    }

    /// The median of costs in tenths of a ns, in ns.
    fn median_cost(values: &mut [u64]) -> Option<f64> {
        median(values).map(|tenths| tenths as f64 / 10.0)
    }

    /// ClockBound 3's own client, where the example is built with the
    /// `clockbound3` feature (the client needs Rust 1.87, above this
    /// crate's 1.85).
    #[cfg(feature = "clockbound3")]
    mod clockbound3 {
        /// The client, on its daemon's page.
        pub type Client = clock_bound::Client;

        /// The client of the page at `path`, once the daemon made it.
        pub fn open(path: &str) -> Option<Client> {
            Client::new_with_path(path).ok()
        }

        /// One read of the client, as its users make it: whether it
        /// answered.
        pub fn read(client: &mut Client) -> bool {
            client.now().is_ok()
        }

        /// ClockBound 3's interval from its own client, when its status
        /// gives one (synchronized or free-running), as for 2.x's.
        pub fn interval(client: Option<&mut Client>) -> Option<(i64, i64)> {
            let now = client?.now().ok()?;
            if !matches!(
                now.clock_status,
                clock_bound::ClockStatus::Synchronized | clock_bound::ClockStatus::FreeRunning
            ) {
                return None;
            }
            let ns = |t: &libc::timespec| t.tv_sec * 1_000_000_000 + t.tv_nsec;
            Some((ns(now.earliest.as_ref()), ns(now.latest.as_ref())))
        }
    }

    /// Without the `clockbound3` feature there is no ClockBound 3 client:
    /// `clients` says so, and the script runs no ClockBound 3.
    #[cfg(not(feature = "clockbound3"))]
    mod clockbound3 {
        /// No client can be made.
        pub enum Client {}

        pub fn open(_: &str) -> Option<Client> {
            None
        }

        pub fn read(client: &mut Client) -> bool {
            match *client {}
        }

        pub fn interval(client: Option<&mut Client>) -> Option<(i64, i64)> {
            match *client? {}
        }
    }

    /// Appends "ours theirs" lines of half-widths (ns) to `path`.
    fn append_pairs(path: &std::path::Path, ours: &[u64], theirs: &[u64]) -> Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("{}", path.display()))?;
        for (o, c) in ours.iter().zip(theirs) {
            writeln!(file, "{o} {c}")?;
        }
        Ok(())
    }

    /// ClockBound's interval from its own client, when its status gives one
    /// (synchronized or free-running).
    fn clockbound_interval(client: Option<&mut ClockBoundClient>) -> Option<(i64, i64)> {
        let now = client?.now().ok()?;
        if !matches!(
            now.clock_status,
            ClockStatus::Synchronized | ClockStatus::FreeRunning
        ) {
            return None;
        }
        let ns = |t: &libc::timespec| t.tv_sec * 1_000_000_000 + t.tv_nsec;
        Some((ns(now.earliest.as_ref()), ns(now.latest.as_ref())))
    }

    /// Where `sample` appends the half-widths side by side.
    struct Pairs<'a> {
        clockbound: Option<&'a std::path::Path>,
        clockbound3: Option<&'a std::path::Path>,
    }

    fn sample(
        truth: Truth,
        seconds: f64,
        phase: &str,
        interval: Duration,
        pairs: &Pairs<'_>,
        clockbound3_path: Option<&str>,
    ) -> Result<()> {
        let (mut ours, mut theirs, mut theirs3) =
            (Side::default(), Side::default(), Side::default());
        let (mut both_ours, mut both_theirs) = (Vec::new(), Vec::new());
        let (mut both3_ours, mut both3_theirs) = (Vec::new(), Vec::new());
        let (mut cost_now, mut cost_ours, mut cost_theirs, mut cost_theirs3) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut sources = std::collections::BTreeMap::<String, u64>::new();
        let mut max_kernel_offset = 0i64;
        let samples = (seconds * 1000.0 / interval.as_millis() as f64) as u64;
        // Opened once, as a ClockBound client does; absent without its daemon.
        let mut client = ClockBoundClient::new().ok();
        let open3 = || clockbound3_path.and_then(clockbound3::open);
        let mut client3 = open3();
        // As ClockBound's client opens its segment first: the sources asked.
        let _ = timehands::realtime_bounds_when_ready(Duration::from_secs(2));
        let (mut clockbound_only, mut clockbound3_only) = (0u64, 0u64);
        for _ in 0..samples {
            // A daemon may be starting: its segment comes a moment later.
            if client.is_none() {
                client = ClockBoundClient::new().ok();
            }
            if client3.is_none() {
                client3 = open3();
            }
            let lo = truth.now();
            let bounds = timehands::realtime_bounds();
            let cb = clockbound_interval(client.as_mut());
            let cb3 = clockbound3::interval(client3.as_mut());
            let hi = truth.now();
            let offset = clock_ns(libc::CLOCK_REALTIME) - truth.now();
            if offset.abs() > max_kernel_offset.abs() {
                max_kernel_offset = offset;
            }
            let our_interval = bounds
                .as_ref()
                .ok()
                .map(|b| (b.earliest.as_nanos() as i64, b.latest.as_nanos() as i64));
            if let Ok(b) = &bounds {
                *sources
                    .entry(format!("{:?}/{:?}", b.source, b.status))
                    .or_default() += 1;
            }
            if ours.count(our_interval, lo, hi) {
                eprintln!("{phase}: ours false: {bounds:?}, truth {lo}..{hi}");
            }
            if theirs.count(cb, lo, hi) {
                eprintln!("{phase}: ClockBound false: {cb:?}, truth {lo}..{hi}");
            }
            if client3.is_some() && theirs3.count(cb3, lo, hi) {
                eprintln!("{phase}: ClockBound 3 false: {cb3:?}, truth {lo}..{hi}");
            }
            clockbound_only += u64::from(our_interval.is_none() && cb.is_some());
            clockbound3_only += u64::from(our_interval.is_none() && cb3.is_some());
            if let (Some(o), Some(c)) = (our_interval, cb) {
                both_ours.push(((o.1 - o.0) / 2) as u64);
                both_theirs.push(((c.1 - c.0) / 2) as u64);
            }
            if let (Some(o), Some(c)) = (our_interval, cb3) {
                both3_ours.push(((o.1 - o.0) / 2) as u64);
                both3_theirs.push(((c.1 - c.0) / 2) as u64);
            }
            // Each reader's cost, in batches taken one after another.
            cost_now.push(cost_per_call(timehands::now));
            cost_ours.push(cost_per_call(timehands::realtime_bounds));
            if let Some(c) = client.as_mut() {
                cost_theirs.push(cost_per_call(|| c.now().is_ok()));
            }
            if let Some(c) = client3.as_mut() {
                cost_theirs3.push(cost_per_call(|| clockbound3::read(c)));
            }
            std::thread::sleep(interval);
        }
        let side = |s: &mut Side| {
            json!({
                "bounds": s.bounds,
                "none": s.none,
                "false": s.false_bounds,
                "median_half_width_ns": median(&mut s.half_widths),
                "max_half_width_ns": s.half_widths.iter().max(),
            })
        };
        if let Some(path) = pairs.clockbound {
            append_pairs(path, &both_ours, &both_theirs)?;
        }
        if let Some(path) = pairs.clockbound3 {
            append_pairs(path, &both3_ours, &both3_theirs)?;
        }
        let ratio = |o: &mut Vec<u64>, c: &mut Vec<u64>| {
            median(o)
                .zip(median(c))
                .map(|(o, c)| o as f64 / c.max(1) as f64)
        };
        let now_ns = median_cost(&mut cost_now);
        let ours_ns = median_cost(&mut cost_ours);
        let theirs3_ns = median_cost(&mut cost_theirs3);
        println!(
            "{}",
            json!({
                "phase": phase,
                "samples": samples,
                "timehands": side(&mut ours),
                "clockbound": side(&mut theirs),
                "both": both_ours.len(),
                "clockbound_only": clockbound_only,
                "median_half_width_ratio": ratio(&mut both_ours, &mut both_theirs),
                "clockbound3": clockbound3_path.map(|_| side(&mut theirs3)),
                "both3": both3_ours.len(),
                "clockbound3_only": clockbound3_only,
                "median_half_width_ratio3": ratio(&mut both3_ours, &mut both3_theirs),
                "cost_ns": {
                    "now": now_ns,
                    "timehands": ours_ns,
                    "clockbound": median_cost(&mut cost_theirs),
                    "clockbound3": theirs3_ns,
                    "timehands_per_now": ours_ns.zip(now_ns).map(|(o, n)| o / n),
                    "timehands_per_clockbound3": ours_ns.zip(theirs3_ns).map(|(o, c)| o / c),
                },
                "sources": sources,
                "max_kernel_offset_ns": max_kernel_offset,
            })
        );
        Ok(())
    }

    pub fn main() -> std::process::ExitCode {
        let cli = Cli::parse();
        let result = match cli.command {
            Command::Save => save(),
            Command::Raw => {
                println!("{}", clock_ns(libc::CLOCK_MONOTONIC_RAW));
                Ok(())
            }
            Command::Clients => {
                println!(
                    "clockbound2{}",
                    if cfg!(feature = "clockbound3") {
                        " clockbound3"
                    } else {
                        ""
                    }
                );
                Ok(())
            }
            Command::Serve {
                port,
                truth,
                reply_delay_us,
            } => serve(port, truth, Duration::from_micros(reply_delay_us)),
            Command::Sample {
                truth,
                seconds,
                phase,
                interval_ms,
                pairs,
                clockbound3,
                pairs_clockbound3,
            } => sample(
                truth,
                seconds,
                &phase,
                Duration::from_millis(interval_ms),
                &Pairs {
                    clockbound: pairs.as_deref(),
                    clockbound3: pairs_clockbound3.as_deref(),
                },
                clockbound3.as_deref(),
            ),
            Command::Restore {
                tick,
                freq,
                status,
                k,
            } => restore(tick, freq, status, k),
        };
        match result {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bounds_truth: {e:#}");
                std::process::ExitCode::FAILURE
            }
        }
    }
}
